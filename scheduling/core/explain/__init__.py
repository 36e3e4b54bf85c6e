"""Why a job is pending, as an ordered isolation (quota → fit → nodes → health), and the fixes ranked by displacement.

Each level asks one question of the state a pending job faces after the cycle:

1. **quota** — does the queue have room? (`QuotaLedger.check`: which limit, with the numbers)
2. **fit** — would the gang fit if every node of its flavor were usable (ready, uncordoned,
   tolerated, healthy)? If not, capacity itself is short: free GPUs, whole nodes, the largest
   free capacity in one required domain, and fragmentation (free GPUs scattered on partly used
   nodes, and the racks holding them).
3. **nodes** — would it fit with the real node conditions (cordoned, not ready, untolerated
   taint) but healthy devices? If not, per-node reasons block: counts over all nodes, like the
   Kubernetes scheduler's "0/1250 nodes are available: …".
4. **health** — does it fit with the real allocatable GPUs? If not, nodes with devices missing
   (allocatable below capacity, or Ready with none) block: they are named.

`blocking` is the first level that blocks; the facts of every level are given anyway. A job that
passes all four waits for its turn (`order`: strict FIFO, a starving job's reservation, backoff) or starts on
the next pass (None).

Fixes are ranked by displacement — GPU-hours other tenants lose, then teams affected: wait (cost 0),
borrow (a changed borrowing limit), uncordon / tolerate / repair the nodes, defragment (requeue small
checkpointable jobs to free whole nodes), preempt (the core's own plan on the same state).

Explanations are computed once per distinct shape per pass (flavor, pod sets, topology,
tolerations, queue, priority, and the cycle's verdict); jobs of one shape share one object.

The package: `facts` (the vocabulary and the facts, Explanation and its JSON form), `diagnosis` (the four levels),
`fixes` (ranked fixes; the defragmentation planner is core.defragmentation, beside preemption), `messages` (the
sentences a person reads) and `explainer` (one per pass, and explain_pending).
"""

from scheduling.core.explain.explainer import Explainer, PassExplanations, explain, explain_pending, holding_after
from scheduling.core.explain.facts import Explanation, Fix, iso
from scheduling.core.explain.fixes import victim_rules

__all__ = ["Explainer", "Explanation", "Fix", "PassExplanations", "explain", "explain_pending", "holding_after", "iso", "victim_rules"]
