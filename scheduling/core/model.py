"""Snapshot and decision dataclasses: the only vocabulary the core speaks.

Over 400 lines for a reason: it is the vocabulary, snapshot in and decisions out, that every core module and every
caller of the core imports; each type is a few plain fields, and the two halves refer to each other (a plan names jobs
and queues, a result carries the state the cycle left)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Mapping, NamedTuple

if TYPE_CHECKING:  # the cycle's working state, handed on in CycleResult.state_after
    from scheduling.core.placement import FleetState
    from scheduling.core.quota import QuotaLedger

FLEET = "fleet"
"""The implicit topology level above every label level: the whole fleet is one domain."""


class JobState(enum.StrEnum):
    PENDING = "pending"
    ADMITTED = "admitted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTED = "preempted"
    EVICTED = "evicted"
    CANCELLED = "cancelled"

    @property
    def holds_gpus(self) -> bool:
        return self in (JobState.ADMITTED, JobState.RUNNING)

    @property
    def is_final(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class QueueingStrategy(enum.StrEnum):
    BEST_EFFORT_FIFO = "best_effort_fifo"
    STRICT_FIFO = "strict_fifo"


class CheckpointWaits(enum.StrEnum):
    """Which paying preemption plans wait for their victims' next checkpoint (SchedulerConfig.preempt_at_checkpoints)."""

    NEVER = "never"
    OWN_QUEUE = "own_queue"
    """Plans whose every victim is of the gang's own queue: a trade within one team."""
    ALL = "all"


class PreemptionPolicy(enum.StrEnum):
    """What a queue's pending jobs may preempt (Kueue's withinClusterQueue + reclaimWithinCohort)."""

    NEVER = "never"
    WITHIN_QUEUE = "within_queue"
    WITHIN_QUEUE_AND_RECLAIM = "within_queue_and_reclaim"

    @property
    def may_preempt_within_queue(self) -> bool:
        return self is not PreemptionPolicy.NEVER

    @property
    def may_reclaim_in_cohort(self) -> bool:
        return self is PreemptionPolicy.WITHIN_QUEUE_AND_RECLAIM


class PendingReason(enum.StrEnum):
    """Why a considered job was not admitted this cycle, most severe level first."""

    QUOTA = "quota"
    FIT = "fit"
    NODES = "nodes"
    HEALTH = "health"
    ORDER = "order"
    BACKOFF = "backoff"
    AWAITING_APPROVAL = "awaiting_approval"
    PRIORITY_CLASS = "priority_class"
    """Its team already runs its cap of GPUs at the job's priority class (see priority_limits)."""


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    """Kubernetes semantics: operator Exists ignores the value; an empty key with Exists tolerates all."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    flavor: str
    capacity_gpus: int
    allocatable_gpus: int
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    is_ready: bool = True
    is_cordoned: bool = False
    external_gpus: int = 0

    @property
    def is_unhealthy(self) -> bool:
        """Devices missing: the device plugin reports fewer GPUs than the node has."""
        return self.allocatable_gpus < self.capacity_gpus or (self.is_ready and self.allocatable_gpus == 0)


class PodSet(NamedTuple):
    # NamedTuples, not dataclasses, for the values that key the cycle's per-shape caches:
    # hashing and comparing them then runs in C, which matters over 100,000 pending jobs.
    name: str
    count: int
    gpus_per_pod: int

    @property
    def gpus(self) -> int:
        return self.count * self.gpus_per_pod


class TopologyRequest(NamedTuple):
    """`required`: every pod inside one domain of that level. `preferred`: try that level first."""

    required: str | None = None
    preferred: str | None = None


@dataclass(frozen=True, slots=True)
class PodPlacement:
    pod_set: str
    index: int
    node: str


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    queue: str
    team: str
    flavor: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    submitted_at: float = 0.0
    topology: TopologyRequest = TopologyRequest()
    runtime_limit_s: int | None = None
    checkpoint_interval_s: int | None = None
    is_preemptible: bool = True
    tolerations: tuple[Toleration, ...] = ()
    state: JobState = JobState.PENDING
    # Set while the job holds GPUs.
    placement: tuple[PodPlacement, ...] = ()
    admitted_at: float | None = None
    started_at: float | None = None
    are_pods_ready: bool = False
    # Requeue bookkeeping.
    evictions: int = 0
    backoff_until: float | None = None
    preempted_by: int | None = None
    priority_class: str | None = None
    attained_gpu_s: float = 0.0
    """GPU-seconds run in earlier runs (before a preemption or eviction); see core.attained."""
    idle_since: float | None = None
    """Since when the job's GPUs have been used below the idle threshold (None: in use); see core.idle."""

    @property
    def gpus(self) -> int:
        total = 0
        for pod_set in self.pod_sets:
            total += pod_set.count * pod_set.gpus_per_pod
        return total

    @property
    def pods(self) -> int:
        return sum(pod_set.count for pod_set in self.pod_sets)

    @property
    def shape(self) -> tuple:
        """Jobs of one shape have the same placement answer on the same fleet state."""
        return (self.flavor, self.pod_sets, self.topology, self.tolerations)

    @property
    def queue_order(self) -> tuple:
        """Its place among its queue's pending jobs before fair share's service levels (fairshare.job_order_key):
        priority (highest first), submit time, id — the order of the job_pending_order index (models.JOB_QUEUE_ORDER)."""
        return (-self.priority, self.submitted_at, self.id)


@dataclass(frozen=True, slots=True)
class Quota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    team: str
    cohort: str | None = None
    weight: float = 1.0
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    preemption: PreemptionPolicy = PreemptionPolicy.WITHIN_QUEUE_AND_RECLAIM
    quotas: Mapping[str, Quota] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    pods_ready_timeout_s: float = 600.0
    backoff_base_s: float = 60.0
    backoff_max_s: float = 3600.0
    restart_overhead_s: float = 300.0
    """Time a restarted gang spends before it does useful work again; charged to every victim."""
    approval_threshold_gpu_hours: float = 64.0
    """Preemption plans above this displacement cost wait for an admin, even inside one team."""
    cross_team_needs_approval: bool = True
    """Plans with a victim of another team wait for an admin (reclaiming lent quota included)."""
    usage_half_life_s: float = 7 * 24 * 3600.0
    topology_aware: bool = True
    """False gives the naive baseline: first fit over all nodes, no domains, no best fit."""
    single_pods_fleet_wide: bool = True
    """A one-pod job without a topology request goes to the best-fitting node of the whole fleet rather
    than of the tightest rack: it has no locality to keep, and on the policy suite the fleet-wide best
    fit left more whole nodes for gangs (docs/simulation.md). False: the tightest domain, as for gangs."""
    single_pods_beside_long_runners: bool = False
    """An admin's option: a one-pod job goes to the partly used node whose longest-running job has run longest (then
    the tightest), not simply the tightest. Durations are heavy-tailed, so a job that has run long is likely to run on
    and its node stays busy anyway; nodes holding only young jobs drain into the whole nodes gangs need. Whole free
    nodes still come last. Off by default: over three jittered replicas of the policy suite it shortens waits on most
    rows (geometric mean 0.68 → 0.65 × `kueue-like`'s), but beyond the suite it makes one team of ITP cluster02 in
    6 teams wait longer than under `fifo-isolated` (docs/simulation.md, since stop 28)."""
    preemption_enabled: bool = True
    max_preemption_plans_per_cycle: int = 8
    """Planning is the expensive step: at most this many blocked queue heads plan per cycle, lowest
    fair share first; the others plan in later cycles. A head whose plan awaits an admin spends none
    while the state it was planned on holds, so every blocked head gets its turn."""
    service_levels_gpu_h: tuple[float, ...] = (2.0, 32.0)
    """Attained-service levels (Tiresias' 2D-LAS; core.attained): within a queue, jobs that have run less
    go first, and a running job a whole level above a blocked job of its queue may be preempted for
    it (if that pays). Empty: plain priority + FIFO, no such preemption. The first level at 2 GPU-hours, not 1,
    since stop 24: at 1 the one-GPU jobs that dominate Philly were stopped after an hour for newcomers, and the
    checkpointed Philly row waited 0.83× `kueue-like`'s; at 2 it waits 0.68× (docs/simulation.md has the sweep)."""
    promote_after_waiting: float | None = None
    """An admin's option: a job that ran before goes back to the first attained-service level once it has been pending
    this many times as long as it has run (e.g. 4), as Tiresias promotes a job past its STARVELIMIT
    (core.attained.ServiceOrder): after a long run it would otherwise wait behind every fresh job of its queue for as
    long as fresh jobs keep coming. Only its place in the queue changes, not which jobs it may preempt for attained
    service. Off (None) by default: at 4 it brings every checkpointed row of the policy suite to a p99 no longer than
    `kueue-like`'s, but on the gaming scenario's overloaded day the honest runs wait 45 % longer (at 16, 8 %), and on
    ITP cluster03 at 95 % load the mean wait doubles: the promoted jobs are long, and start ahead of the short fresh
    ones (docs/simulation.md, since stop 30)."""
    defragment_for_owed_gangs: bool = False
    """An admin's policy: a gang its own nominal quota holds, kept out only by fragmentation (enough GPUs free, scattered),
    moves small checkpointing jobs off the cheapest partly used nodes when that pays (core.defragmentation), as Run:ai
    consolidates. Off by default: on the policy suite it brings Philly's team e13805 under its isolated wait (0.99×) but
    lengthens cluster02's checkpointed waits by a third and loses 2.3 % of the synthetic row's GPU-hours, and in the
    gaming scenario it sped up the honest runs more than the gamed ones, so squatting there cost the others ×1.053 their
    honest wait (docs/simulation.md, docs/gaming.md)."""
    drain_for_underserved_gangs: bool = False
    """An admin's option: the longest-waiting gang that its team's nominal quota holds but no set of nodes fits, of a
    team that has used less than half the average team's share, gets the nodes it needs drained: jobs that would
    borrow keep off them until it starts (core.drain). Without checkpoints nothing else brings such a team its whole
    nodes back. Off by default: on the policy suite it brings Philly's team e13805 from 1.8× to 1.07× its
    `fifo-isolated` wait and changes no other row, but on Philly ×0.2 it lengthens every job's mean wait by 5 % and
    leaves that team at 7× (docs/simulation.md, since stop 29). The start estimates do not model it yet."""
    preempt_only_when_it_pays: bool = True
    """A plan runs only when its displacement cost is below the gang's gain (core.payoff)."""
    payoff_margin: float = 3.0
    """How many times its cost a plan's gain must be: the gain is an estimate (core.payoff), the cost is not."""
    preempt_at_checkpoints: CheckpointWaits = CheckpointWaits.OWN_QUEUE
    """Which plans that pay wait for a checkpoint: one waits when its victims' work since their last ones (each at
    least a restart's worth) outweighs the wait until the soonest candidate's next one, for the gang and every job
    queued behind it (core.payoff.checkpoint_wait_s). By default only plans within the gang's own queue wait: the
    team trades a few minutes of its gang's wait for its own job's work, and a reclaim of lent quota stays immediate,
    as in Kueue. On the policy suite that brought every checkpointed row's GPU-hours lost under 2 % (synthetic: 2.2 %
    → 1.5 %) for the same geometric mean of the waits, while team e13805's checkpointed wait on Philly, a knife edge,
    went from 1.00× to 1.48× its isolated wait ("all", every weighed plan waiting: 1.28×; "never", stop 26's
    default: docs/simulation.md)."""
    starvation_after_s: float | None = None
    """A job pending this long, whose size its queue's nominal quota could hold, gets a reservation
    (Volcano's sla-waiting-time): later jobs of its queue stop passing it, so the queue's own usage
    drains until the job can reclaim its nominal quota. None (the default) turns it off: on the
    policy suite the reservation idled GPUs the queue's small jobs could have used and made waits
    longer on every ITP trace (docs/simulation.md); a big gang gets in by a plan that pays instead."""
    fair_share_per_team: bool = True
    """One fair-share account per team (core.accounts): a team's queues rank by its summed share and usage, so more
    queues are not more weight. False: every queue its own account (Kueue's per-ClusterQueue fair sharing)."""
    uncheckpointed_borrowers_last: bool = True
    """While a job that checkpoints waits in the cohort, a queue whose next job would borrow without checkpoints goes
    after every other (core.fairshare): lent GPUs go first to jobs that can give them back cheaply. In the gaming
    scenario it takes squatting from a gain to a loss (docs/gaming.md); no row of the policy suite changes (each has
    every job checkpointing or none). Acting where nothing checkpoints too (Kueue's entry order) lengthened cluster07's
    waits by 3-8 % on three traces (docs/simulation.md). False: the order of fair share alone, as `kueue-like` keeps it."""
    idle_grace_s: float = 600.0
    """A job below the idle threshold this long is flagged idle (core.idle): the first victim of any blocked job
    of its cohort, taken before any other and not weighed, since it loses no work."""
    reclaim_at_cost_after_s: float | None = None
    """An admin's policy: a job on borrowed quota without checkpoints for this long (e.g. 7200) is reclaimed at its
    displacement cost, unweighed by the value rule (core.borrowed), so long uncheckpointed runs do not shield borrowed
    quota. None (the default): off — on the policy suite, where no job checkpoints in half the rows, it lost 2–14 % of
    GPU-hours and lengthened those rows' waits by up to 25 % (docs/gaming.md)."""
    suspend_idle_jobs: bool = False
    """An admin's policy: a flagged idle job is suspended (requeued with the readiness backoff) as soon as a job of its
    cohort waits for its flavor, plan or no plan."""

    def __post_init__(self) -> None:
        # Settings give the choice as a string: a misspelt one fails here, at start-up, naming the valid values.
        try:
            waits = CheckpointWaits(self.preempt_at_checkpoints)
        except ValueError:
            raise ValueError(f"preempt_at_checkpoints must be one of {', '.join(CheckpointWaits)}, "
                             f"not {self.preempt_at_checkpoints!r}") from None
        object.__setattr__(self, "preempt_at_checkpoints", waits)


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    topology: tuple[str, ...]
    """Label keys above the node level, coarsest first (e.g. ("block", "rack"))."""
    nodes: tuple[Node, ...]
    queues: Mapping[str, Queue]
    admitted: tuple[Job, ...]
    """Jobs holding GPUs (admitted or running)."""
    pending: tuple[Job, ...]
    """Jobs waiting; any order, the core orders them."""
    historical_usage: Mapping[str, float] = field(default_factory=dict)
    """Per queue: GPU-seconds used, decayed by the configured half-life (see fairshare.decay_usage)."""
    approved_preemptions: Mapping[int, frozenset[int]] = field(default_factory=dict)
    """Per pending job id: the victim ids an admin approved for it."""
    priority_class_caps: Mapping[str, int] = field(default_factory=dict)
    """Per priority class: the GPUs each team may hold at once in jobs of that class (classes without a cap absent)."""
    awaiting_plans: Mapping[int, "PlannedPreemption"] = field(default_factory=dict)
    """Per pending job id: its plan still awaiting an admin's decision, with the fingerprint of the state
    it was planned on. While that state holds, the cycle proposes it again without planning."""
    config: SchedulerConfig = SchedulerConfig()


# --- decisions -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Admission:
    job_id: int
    placement: tuple[PodPlacement, ...]
    is_borrowing: bool = False
    preempted: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Victim:
    job_id: int
    queue: str
    team: str
    gpus: int
    cost_gpu_hours: float


@dataclass(frozen=True, slots=True)
class PreemptionPlan:
    job_id: int
    victims: tuple[Victim, ...]
    domain: str
    reason: PendingReason
    """What the preemption overcomes: quota (reclaim / within queue) or fit."""

    @property
    def cost_gpu_hours(self) -> float:
        return sum(victim.cost_gpu_hours for victim in self.victims)

    @property
    def teams_affected(self) -> tuple[str, ...]:
        return tuple(sorted({victim.team for victim in self.victims}))

    @property
    def victim_ids(self) -> frozenset[int]:
        return frozenset(victim.job_id for victim in self.victims)


@dataclass(frozen=True, slots=True)
class PlannedPreemption:
    plan: PreemptionPlan
    needs_approval: bool
    fingerprint: str = ""
    """The state the plan was made on (`preemption.state_fingerprint`), kept with a plan that awaits approval."""


class Pending(NamedTuple):
    job_id: int
    reason: PendingReason
    message: str


Verdict = tuple[PendingReason, str]
"""Why a job stays pending: shared by every job of one shape, so a cycle makes few of them."""


class PendingVerdicts(Sequence[Pending]):
    """The cycle's pending jobs and their verdicts, as two parallel lists.

    A cycle leaves up to 100,000 jobs pending each pass; appending an id and a shared verdict
    costs a third of building a `Pending` per job, and most readers only count them.
    """

    __slots__ = ("_ids", "_verdicts")

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._verdicts: list[Verdict] = []

    def add(self, job_id: int, verdict: Verdict) -> None:
        self._ids.append(job_id)
        self._verdicts.append(verdict)

    def by_job(self) -> dict[int, Verdict]:
        """Job id → (reason, message), built at C speed."""
        return dict(zip(self._ids, self._verdicts))

    def adders(self):
        """The two bound `append`s, for hot loops that record many jobs."""
        return self._ids.append, self._verdicts.append

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, index: int) -> Pending:
        return Pending(self._ids[index], *self._verdicts[index])

    def __iter__(self) -> Iterator[Pending]:
        for job_id, verdict in zip(self._ids, self._verdicts):
            yield Pending(job_id, *verdict)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PendingVerdicts):
            return self._ids == other._ids and self._verdicts == other._verdicts
        return NotImplemented

    def __repr__(self) -> str:
        return f"PendingVerdicts({len(self)} jobs)"


@dataclass(frozen=True, slots=True)
class Eviction:
    job_id: int
    backoff_until: float
    message: str


@dataclass(frozen=True, slots=True)
class CycleResult:
    admissions: tuple[Admission, ...] = ()
    preemptions: tuple[PlannedPreemption, ...] = ()
    """Plans made this cycle: executed ones are those whose victims appear in `admissions`."""
    evictions: tuple[Eviction, ...] = ()
    """Gangs not ready in time: back to pending with backoff."""
    pending: PendingVerdicts = field(default_factory=PendingVerdicts)
    """One entry per pending job the cycle considered and left waiting."""
    state_after: StateAfterCycle | None = field(default=None, compare=False, repr=False)
    """The fleet and ledger the cycle finished with (run_admission_cycle always sets it)."""
    recheck_at: float | None = None
    """When the earliest plan put off until a checkpoint is due (SchedulerConfig.preempt_at_checkpoints): the replay runs
    a cycle then; live, the reconciler's beat (GANGWAY_RECONCILE_INTERVAL_S) comes within its interval."""
    declined: Mapping[int, str] = field(default_factory=dict)
    """Jobs the cycle could have preempted for but did not, because it would not pay or waits for a checkpoint
    (core.payoff): job id → why, in the words of its verdict. The explainer's preempt fix says so instead of offering the plan as one that runs."""


@dataclass(frozen=True, slots=True)
class StateAfterCycle:
    """The fleet state and quota ledger with the cycle's decisions applied, handed on so that what runs next on the
    same snapshot (services.plans settling plans, the explainer) does not rebuild them. Whoever tries a change on them
    undoes it; whoever adds decisions (services.plans executing an approved plan) applies them here too."""

    fleet: FleetState
    ledger: QuotaLedger
