"""The sentences a person reads: the headline (the conclusion in plain words) and the summary (the blocking level's
facts with their numbers). The one author of an explanation's headline and summary; the facts carry the machine
reasons, and each level's message comes with its facts (the fit sentence from core.reasons, which the cycle's verdict
speaks too)."""

from __future__ import annotations

import datetime as dt
from typing import Mapping, Sequence

from scheduling.core.explain.facts import Action, FitFacts, Fix, HealthFacts, Level, NodeFacts, QuotaFacts, VictimFacts
from scheduling.core.model import Job, Queue
from scheduling.core.quota import QuotaLimit


def summary(job, blocking, quota: QuotaFacts, fit: FitFacts, nodes: NodeFacts, health: HealthFacts,
             order: str, never: bool) -> str:
    # `blocking` names the level; the summary is the sentence a person reads after it.
    if blocking == Level.QUOTA:
        text = quota.message
    elif blocking == Level.FIT:
        text = fit.message
    elif blocking == Level.NODES:
        text = f"the flavor has room, but {nodes.message}"
    elif blocking == Level.HEALTH:
        text = f"it would fit if every device were healthy; {health.message}"
    elif blocking == Level.ORDER:
        text = f"it would fit now, but {order}"
    else:
        text = "fits quota and placement now: starts on the next pass"
    if never:
        text += " (waiting alone will never start it)"
    return text


def headline(job: Job, queue: Queue, queues: Mapping[str, Queue], blocking, quota: QuotaFacts, fit: FitFacts, nodes: NodeFacts,
              health: HealthFacts, order: str, never: bool, fixes: tuple[Fix, ...], *, now: float) -> str:
    """The conclusion first, in words a researcher uses; the levels below keep the arithmetic."""
    preempt = next((f for f in fixes if f.action == Action.PREEMPT), None)
    flavor = job.flavor
    if blocking == Level.QUOTA and quota.limit == QuotaLimit.LENT_OUT:
        teams = {queues[name].team for name, _ in quota.borrowers if name in queues} - {queue.team}
        text = f"Team {queue.team}'s {flavor} quota is lent to {count(len(teams), 'other team')}"
        if preempt is not None:
            text += "; " + making_room(preempt, now, taking_back=quota.short_by)
        else:
            text += "; it comes back as their jobs end"
        preempt = None
    elif blocking == Level.QUOTA and quota.limit == QuotaLimit.NO_QUOTA:
        text = f"Queue {job.queue} has no {flavor} quota"
    elif blocking == Level.QUOTA and quota.limit == QuotaLimit.NOMINAL:
        text = (f"Queue {job.queue} has {count(max(0, quota.nominal - quota.used), 'free ' + flavor + ' GPU')} of its "
                f"{quota.nominal} and this job needs {quota.requested}")
    elif blocking == Level.QUOTA and quota.limit == QuotaLimit.BORROWING_LIMIT:
        text = f"Starting it would take queue {job.queue} past its {flavor} borrowing limit of {quota.borrowing_limit} GPUs"
    elif blocking == Level.QUOTA:
        text = f"Queue {job.queue} has used its {flavor} quota and the cohort has {quota.cohort_can_lend} GPUs left to lend"
    elif blocking == Level.FIT and fit.fragmentation.is_fragmented and fit.whole_free_nodes < fit.whole_nodes_needed:
        text = (f"There are {fit.free_gpus} free {flavor} GPUs, but scattered: the gang needs "
                f"{count(fit.whole_nodes_needed, 'whole node')} and {fit.whole_free_nodes} are free")
    elif blocking == Level.FIT and fit.required_level and fit.free_gpus >= fit.needed_gpus:
        largest = fit.largest_domain.free_gpus if fit.largest_domain else 0
        text = (f"No single {fit.required_level} has room for the gang: it needs {fit.needed_gpus} GPUs in one "
                f"{fit.required_level}, the roomiest has {largest} free")
    elif blocking == Level.FIT:
        text = f"The fleet has {fit.free_gpus} free {flavor} GPUs and this job needs {fit.needed_gpus}"
    elif blocking == Level.NODES:
        text = f"No node can take one of its {nodes.pod_gpus}-GPU pods right now ({nodes.eligible} of {nodes.total} could)"
    elif blocking == Level.HEALTH:
        text = f"It would fit if every GPU were healthy: {count(health.count, 'node')} report missing GPUs"
    elif blocking == Level.PRIORITY_CLASS:
        text = (f"Team {queue.team} already runs as many GPUs at priority class {job.priority_class} as a team may; "
                f"it starts as those jobs end, or sooner at a lower class")
    elif blocking == Level.ORDER:
        text = f"It fits now but waits its turn: {order}"
    else:
        return "It fits now and starts on the next pass."
    if preempt is not None:
        text += "; " + making_room(preempt, now)
    if never:
        text += "; waiting alone will never start it"
    return text + "."


def making_room(preempt: Fix, now: float, *, taking_back: int | None = None) -> str:
    """What the preempt fix does, for the headline: whose GPUs it takes, idle jobs named first (they lose no work since
    they went idle), and who decides. `taking_back`: the GPUs of the job's own quota lent out, when that blocks."""
    idle = preempt.idle_victims
    working = len(preempt.victims) - len(idle)
    if preempt.declined:
        return f"Gangway could make room by preempting {count(len(preempt.victims), 'job')}, but not now: {preempt.declined}"
    if idle and not working:
        what = f"{sum(v.gpus for v in idle)} GPUs{' back' if taking_back else ''} from {idle_jobs(idle, now)}, {idle_loss(idle)}"
        if preempt.needs_approval:
            return f"Gangway would take {what}, once an admin approves"
        return f"Gangway will take {what}; no approval is needed"
    by_admin = "which needs an admin" if preempt.needs_approval else "which Gangway does by itself"
    if idle:
        return (f"Gangway can make room by taking {sum(v.gpus for v in idle)} GPUs from {idle_jobs(idle, now)} and "
                f"preempting {count(working, 'working job')}, {by_admin}")
    if taking_back:
        return f"Gangway can take {taking_back} GPUs back by preempting {count(working, 'job')}, {by_admin}"
    return f"Gangway can make room by preempting {count(working, 'job')}, {by_admin}"


def idle_jobs(idle: Sequence[VictimFacts], now: float) -> str:
    """`1 idle job of team language (idle since 14:05 UTC)`; several: of which teams, and the longest idle since when."""
    teams = sorted({v.team for v in idle})
    who = f"team {teams[0]}" if len(teams) == 1 else f"teams {', '.join(teams)}"
    since = min(v.idle_since for v in idle if v.idle_since is not None)
    when = "idle since" if len(idle) == 1 else "the longest idle since"
    return f"{count(len(idle), 'idle job')} of {who} ({when} {clock_time(since, now)})"


def idle_loss(idle: Sequence[VictimFacts], *, with_restart: bool = False) -> str:
    """What idle victims lose: no work when idle since their start or last checkpoint, else the work before they idled;
    and, `with_restart`, their restart."""
    lost = sum(v.lost_work_gpu_hours for v in idle)
    one = len(idle) == 1
    if lost < 0.05:
        return "losing no work" + (f", only {'its' if one else 'their'} restart" if with_restart else "")
    return (f"losing {lost:.1f} GPU-hours of work done before {'it' if one else 'they'} went idle"
            + (f" and {'its' if one else 'their'} restart" if with_restart else ""))


def clock_time(epoch_s: float, now: float) -> str:
    """`14:05 UTC` on the day of `now`, `Dec 3, 14:05 UTC` before it."""
    moment = dt.datetime.fromtimestamp(epoch_s, tz=dt.timezone.utc)
    if moment.date() == dt.datetime.fromtimestamp(now, tz=dt.timezone.utc).date():
        return f"{moment:%H:%M} UTC"
    return f"{moment:%b} {moment.day}, {moment:%H:%M} UTC"


def attained_service(job: Job, level: int, fresher: int) -> str:
    """Why a job that ran before waits behind `fresher` jobs of its queue (core.attained)."""
    return (f"has already run {job.attained_gpu_s / 3600:.1f} GPU-hours (attained-service level {level}): "
            f"waits behind {count(fresher, 'job')} of its queue with less attained service")


def promoted(job: Job, wait_ratio: float) -> str:
    """Why a job that ran before is back in line with the fresh jobs of its queue (core.attained.ServiceOrder)."""
    return (f"has already run {job.attained_gpu_s / 3600:.1f} GPU-hours, but has waited more than {wait_ratio:g}× as "
            "long as it ran: back at the first attained-service level, in line with the fresh jobs of its queue")


def lent_last() -> str:
    """Why a job that would borrow without checkpoints gets lent GPUs after others (SchedulerConfig.uncheckpointed_borrowers_last)."""
    return ("would borrow without checkpoints, so lent GPUs go first to jobs that checkpoint or stay within their quota "
            "(taking them back from this job would lose its whole run); a checkpoint interval puts it back in line")


def count(n: int, noun: str) -> str:
    """`1 job`, `3 jobs`; `1 free GPU`, `2 free GPUs` (the last word takes the plural)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
