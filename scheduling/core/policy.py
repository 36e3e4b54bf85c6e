"""The scheduling policy in force, in words an admin reads (the fleet API and page show it)."""

from __future__ import annotations

from scheduling.core.drain import DRAIN_WITHIN_S
from scheduling.core.model import CheckpointWaits, SchedulerConfig


def policy_in_force(config: SchedulerConfig) -> dict[str, str]:
    levels = config.service_levels_gpu_h
    order = (
        "least attained service first: levels at " + ", ".join(f"{h:g}" for h in levels)
        + " GPU-hours already run, FIFO within a level"
        + (f"; a job that ran before goes back to the first level once it has waited {config.promote_after_waiting:g}× as "
           "long as it ran"
           if config.promote_after_waiting is not None else "")
        if levels else "priority, then FIFO"
    )
    fair_share = (
        ("one account per team (its queues summed): " if config.fair_share_per_team else "per queue: ")
        + "lowest dominant share of borrowed GPUs first; at equal shares, less usage (decayed with a half-life of "
        f"{config.usage_half_life_s / 86400:g} days) per weight × nominal GPUs"
    )
    idle = (f"a job below the idle threshold for {config.idle_grace_s:g} s is the first victim of any blocked job of its "
            "cohort, unweighed" + ("; suspended while its cohort waits" if config.suspend_idle_jobs else ""))
    lent_last = ("a queue whose next job would borrow without checkpoints goes after all others while a job that "
                 "checkpoints waits: lent GPUs go first to jobs that can give them back cheaply"
                 if config.uncheckpointed_borrowers_last else "")
    reclaim = (f"a job on borrowed quota without checkpoints for {config.reclaim_at_cost_after_s:g} s is reclaimed at its "
               "displacement cost, unweighed" if config.reclaim_at_cost_after_s is not None else "")
    squatting = "; ".join(rule for rule in (lent_last, reclaim) if rule) or "off"
    single_pod = ("the partly used node whose longest-running job has run longest, then the tightest"
                  if config.single_pods_beside_long_runners else "the best-fitting node")
    single_pod += " of the whole fleet" if config.single_pods_fleet_wide else " of the tightest rack or block"
    placement = (
        "a gang in the smallest rack or block that holds it, breaking the fewest whole nodes; a single pod on "
        + single_pod if config.topology_aware else "first fit by node name"
    )
    if not config.preemption_enabled:
        preemption = "off"
    elif config.preempt_only_when_it_pays:
        preemption = (f"only when it pays: the gang's estimated gain must exceed {config.payoff_margin:g}× the "
                      f"victims' lost work plus {config.restart_overhead_s:g} s restart; a victim without checkpoints "
                      f"only when GPUs would not come back sooner on their own, and never for attained service "
                      f"alone (priority preemption is not weighed)")
        if config.preempt_at_checkpoints is not CheckpointWaits.NEVER:
            which = "within the gang's own queue " if config.preempt_at_checkpoints is CheckpointWaits.OWN_QUEUE else ""
            preemption += (f"; a plan {which}that pays waits for a checkpoint when its victims' work since their last "
                           "ones outweighs the wait, for the gang and the jobs queued behind it, until the soonest "
                           "candidate's next one")
    else:
        preemption = "whenever a plan makes room (cheapest displacement first)"
    starvation = (f"after {config.starvation_after_s:g} s pending" if config.starvation_after_s is not None else "off")
    defragmentation = (
        "a gang its own nominal quota holds, kept out only by scattered free GPUs, moves small checkpointing jobs off "
        f"the cheapest partly used nodes when the drain it spares exceeds {config.payoff_margin:g}× their lost work"
        if config.preemption_enabled and config.defragment_for_owed_gangs else "off"
    )
    drains = ("jobs that would borrow keep off the nodes the longest-waiting gang of a team that has used less than half "
              "the average share needs, while its quota holds it and no set of nodes does: the nodes that should empty "
              f"soonest, if within {DRAIN_WITHIN_S / 3600:g} hours"
              if config.drain_for_underserved_gangs else "off")
    return {"order": order, "fair_share": fair_share, "placement": placement, "preemption": preemption,
            "defragmentation": defragmentation, "drains": drains, "starvation_reservations": starvation, "idle_allocations": idle,
            "borrowed_without_checkpoints": squatting}
