"""Start estimates: the live admission cycle run forward on virtual time from a snapshot.

Like Slurm's `squeue --start`: running jobs end at their runtime limits (a job without one holds its
GPUs past the horizon), and at every end event (and every promotion, below) the pending jobs are admitted
by the same `run_admission_cycle`, in the same order, as the reconciler would. A job admitted at virtual
time t is estimated to start at t; a job not admitted within the horizon (default 7 days) gets None.

The forecast runs without preemption and without suspending idle jobs: preemption plans that need approval may
never be approved, and the cheap ones run on the next pass anyway; the estimate is what *waiting* gives. The admin's
other options are run as the live pass runs them. A job that ran before goes back to the first attained-service level
(SchedulerConfig.promote_after_waiting) at an instant known in advance, which is an event too: from then on the
job waits in its new place in its queue, and a strict FIFO or starving head it now passes no longer holds it. Under
drains for under-served gangs (drain_for_underserved_gangs) each cycle is passed the jobs the live pass searches for
the gang to drain for (below), so it drains for the same gang and keeps the same jobs off its nodes. One
approximation remains there: usage fades only from one event to the next, so a team that stops (or starts) being
under-served between two events ends (or starts) its drain at the second.

Why it is fast enough for 100,000 pending jobs (a cycle only at events, and only over the jobs that can
matter): without preemption and with every gang ready, a cycle only takes capacity (a drain only keeps jobs
off it), and quota checks and gang fits are monotone (less free capacity never makes a failed check pass). So
a job whose (queue, shape) fails quota or placement at the start of a cycle fails throughout it (a shape here
is the core's cycle.failure_key: also whether the job may borrow), and is left out — except where it steers
the cycle: each queue's head and the job right after every job that may be admitted (the fair-share key
re-ranks a queue by the job at its cursor, whatever its shape), in a strict FIFO queue every job up to its
first blocked one, in a best-effort queue the leading starving jobs of each band of each shape, up to the
first that surely reaches its checks (it may take a starvation reservation), the queue's first job that
checkpoints (under uncheckpointed_borrowers_last one waiting orders its cohort), and under drains the first
GANGS_LOOKED_AT waiting jobs of each queue of an under-served team (where core.drain.choose_drain looks). Of
each (queue, shape) that may start, the first INITIAL_CAP waiting jobs are passed; when all of them start (or
are only passed over) and more wait, the cycle may have been cut short: it is dropped and run again from the
same state with four times as many of that shape passed, and only a cycle not cut short is applied
(_Forward._cycle argues why its admissions are the full cycle's). So the forecast gives the full cycle's
answer at every event; as many jobs of a shape as an instant needed are passed from then on, so a steady state
seldom runs a cycle twice. Where no (queue, shape) may start, no cycle runs until a job ends. And a promotion
re-sorts nothing: a job promoted within the horizon holds both its places in its queue from the start, skipped
in the one it is not in.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from itertools import islice, takewhile
from operator import itemgetter
from typing import Iterable, Iterator, Mapping

from scheduling.core.attained import NO_SERVICE_ORDER, ServiceOrder
from scheduling.core.cycle import failure_key, run_admission_cycle
from scheduling.core.drain import GANGS_LOOKED_AT, underserved_teams
from scheduling.core.fairshare import decay_usage, job_order_key, sort_queue
from scheduling.core.model import CycleResult, Job, JobState, Queue, QueueingStrategy, Snapshot
from scheduling.core.placement import fleet_state_for
from scheduling.core.quota import QuotaLedger
from scheduling.core.queue_stops import PASSED_OVER, is_backing_off, may_be_passed_over, strict_fifo_reach
from scheduling.core.starvation import is_starving, starving_before

DEFAULT_HORIZON_S = 7 * 24 * 3600.0
INITIAL_CAP = 8
"""Jobs of one (queue, shape) passed to a cycle at first; four times more while a cycle may be cut short on them. A job
passed and refused costs the cycle microseconds, a cycle run again tens of milliseconds: on `bench estimate` 8 ran 15 %
fewer cycles than 2 and took 10 % less time (16 no less, 32 more)."""


@dataclass(frozen=True)
class Forecast:
    now: float
    horizon_s: float
    starts: Mapping[int, float | None]
    """Pending job id → estimated start (epoch seconds), or None: not within the horizon."""
    cycles: int = 0
    events: int = 0

    def wait_s(self, job_id: int) -> float | None:
        start = self.starts.get(job_id)
        return None if start is None else start - self.now


def forecast(snapshot: Snapshot, *, horizon_s: float = DEFAULT_HORIZON_S) -> Forecast:
    """Each pending job's estimated start: the core run forward from `snapshot` until the horizon."""
    return _Forward(snapshot, horizon_s).run()


def promotion_time(job: Job, service: ServiceOrder) -> float | None:
    """When the pending job goes back to the first service level (ServiceOrder.is_promoted); None when it ranks there
    already or never will."""
    if service.promote_after_waiting is None or service.pending_level(job) == 0:
        return None
    ran_s = job.attained_gpu_s / max(job.gpus, 1)
    at = job.submitted_at + ran_s * (1 + service.promote_after_waiting)
    # Rounded, the sum can fall just short of the instant is_promoted holds, and the cycle run then would not promote.
    while not replace(service, now=at).is_promoted(job):
        at = math.nextafter(at, math.inf)
    return at


@dataclass
class _QueueLine:
    """One queue's pending jobs in the core's order, with each shape's positions. A job promoted within the horizon
    (ServiceOrder.is_promoted) has two positions, the one it waits in before its promotion and the one after, and is
    skipped in the other: its promotion moves it without re-sorting the queue."""

    queue: Queue | None
    jobs: list[Job]
    service: ServiceOrder = NO_SERVICE_ORDER
    """The core's attained-service order at the snapshot's time: part of the queue's order."""
    promoted_later: set[int] = field(default_factory=set)
    """Ids of the jobs promoted within the horizon."""
    shapes: list[tuple] = field(default_factory=list)
    """Each position's shape (cycle.failure_key, built once)."""
    by_key: dict[tuple, list[int]] = field(default_factory=dict)
    cursor: dict[tuple, int] = field(default_factory=dict)
    skipped: set[int] = field(default_factory=set)
    """Positions no cycle is passed: those of jobs already admitted, and the other position of a promoted job."""
    position: dict[int, int] = field(default_factory=dict)
    """Job id → the position it waits in now."""
    position_once_promoted: dict[int, int] = field(default_factory=dict)
    bands: dict[tuple, list[int]] = field(default_factory=dict)
    """Per shape: where each band of the order (priority, service level) begins in `by_key[shape]`; within a band
    jobs go by submit time."""
    checkpointing: list[int] = field(default_factory=list)
    """Positions of the jobs that checkpoint (Job.checkpoint_interval_s)."""
    checkpointing_cursor: int = 0

    def __post_init__(self) -> None:
        if self.promoted_later:
            self._sort_with_positions_once_promoted()
        else:
            sort_queue(self.jobs, self.service)
        last_band: dict[tuple, tuple] = {}
        for i, job in enumerate(self.jobs):
            # A promoted job's position once promoted (service level 0) comes before the one it waits in now.
            is_once_promoted = job.id in self.promoted_later and job.id not in self.position_once_promoted
            key = failure_key(job)
            self.shapes.append(key)
            positions = self.by_key.setdefault(key, [])
            band = (job.priority, 0 if is_once_promoted else self.service.pending_level(job))
            if not positions or last_band[key] != band:
                self.bands.setdefault(key, []).append(len(positions))
                last_band[key] = band
            positions.append(i)
            if job.checkpoint_interval_s:
                self.checkpointing.append(i)
            if is_once_promoted:
                self.position_once_promoted[job.id] = i
                self.skipped.add(i)
            else:
                self.position[job.id] = i
        self.cursor = dict.fromkeys(self.by_key, 0)

    def _sort_with_positions_once_promoted(self) -> None:
        """The core's order (fairshare.job_order_key), each job promoted within the horizon also in its place once
        promoted."""
        promoted = replace(self.service, now=math.inf)  # an order in which every one of them has been promoted
        entries = [(job_order_key(job, self.service), job) for job in self.jobs]
        entries += [(job_order_key(job, promoted), job) for job in self.jobs if job.id in self.promoted_later]
        entries.sort(key=itemgetter(0))
        self.jobs = [job for _, job in entries]

    def promote(self, job_id: int) -> None:
        """The waiting job goes back to the first service level: from now on it waits in its position once promoted."""
        self.skipped.add(self.position[job_id])
        i = self.position[job_id] = self.position_once_promoted.pop(job_id)
        self.skipped.discard(i)
        key = self.shapes[i]
        # Its new position may come before the one its shape's search has reached.
        self.cursor[key] = min(self.cursor[key], bisect_left(self.by_key[key], i))
        if self.jobs[i].checkpoint_interval_s:
            self.checkpointing_cursor = min(self.checkpointing_cursor, bisect_left(self.checkpointing, i))

    def waiting(self) -> Iterator[Job]:
        """The jobs not yet admitted, in order."""
        return (job for i, job in enumerate(self.jobs) if i not in self.skipped)

    def first_waiting(self, count: int) -> list[int]:
        """Positions of the first `count` jobs not yet admitted."""
        return list(islice((i for i in range(len(self.jobs)) if i not in self.skipped), count))

    def first_waiting_checkpointing(self) -> int | None:
        """The position of the first job not yet admitted that checkpoints."""
        k = self.checkpointing_cursor
        while k < len(self.checkpointing) and self.checkpointing[k] in self.skipped:
            k += 1
        self.checkpointing_cursor = k
        return self.checkpointing[k] if k < len(self.checkpointing) else None

    def next_waiting(self, i: int) -> int | None:
        while i < len(self.jobs) and i in self.skipped:
            i += 1
        return i if i < len(self.jobs) else None


class _Forward:
    def __init__(self, snapshot: Snapshot, horizon_s: float) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now
        self.horizon_s = horizon_s
        self.end_s = snapshot.now + horizon_s
        self.config = replace(snapshot.config, preemption_enabled=False, suspend_idle_jobs=False)
        self.starts: dict[int, float | None] = {job.id: None for job in snapshot.pending}
        self.running: dict[int, Job] = {}
        self.last_caps: dict[tuple, int] = {}
        """Per (queue, shape): how many of its jobs were passed to the last cycle that needed more than INITIAL_CAP;
        later cycles start from as many, so a steady state does not cut every cycle short."""
        self.events: list[tuple[float, int]] = []
        """(time, job id) of ends; job id -1 marks a wake-up (a backoff ends)."""
        self.fleet = fleet_state_for(snapshot)
        for job in snapshot.admitted:
            job = job if job.are_pods_ready else replace(job, are_pods_ready=True)
            since = job.started_at if job.started_at is not None else job.admitted_at
            self._hold(job, since=snapshot.now if since is None else since)
        self.ledger = QuotaLedger(snapshot.queues, self.running.values())
        service = ServiceOrder.at(self.config, snapshot.now)
        self.promotions: list[tuple[float, int, str]] = []
        """(time, job id, queue) at which a waiting job goes back to the first service level, and its queue's order
        changes."""
        by_queue: dict[str, list[Job]] = {}
        promoted_later: dict[str, set[int]] = {}
        for job in snapshot.pending:
            by_queue.setdefault(job.queue, []).append(job)
            if job.backoff_until is not None and self.now < job.backoff_until <= self.end_s:
                heapq.heappush(self.events, (job.backoff_until, -1))
            promoted_at = promotion_time(job, service)
            if promoted_at is not None and promoted_at <= self.end_s:
                self.promotions.append((promoted_at, job.id, job.queue))
                promoted_later.setdefault(job.queue, set()).add(job.id)
        heapq.heapify(self.promotions)
        self.lines = {name: _QueueLine(snapshot.queues.get(name), jobs, service, promoted_later.get(name, set()))
                      for name, jobs in by_queue.items()}
        self.usage = dict(snapshot.historical_usage)
        self.cycles = 0
        self.event_count = 0
        self.none_may_start = False
        """No waiting job's quota and shape fitted at the last cycle, and no job has ended since: a cycle would admit
        nothing, whatever a promotion or a backoff's end changed (they change the order, not what fits)."""
        self.capped: dict[tuple, tuple[list[int], int]] = {}
        """Per (queue, shape) the cycle is passed only the first jobs of: their positions, and where in
        `by_key[shape]` they end."""

    def _hold(self, job: Job, *, since: float) -> None:
        self.running[job.id] = job
        self.fleet.allocate_placement(job.placement, job)
        if job.runtime_limit_s is not None:
            # A job past its limit still holds GPUs now; it is taken to end at once.
            heapq.heappush(self.events, (max(self.now, since + job.runtime_limit_s), job.id))

    def run(self) -> Forecast:
        t = self.now
        while True:
            self._end_jobs_until(t)
            self._promote_until(t)
            self._cycle(t)
            if not any(len(line.skipped) < len(line.jobs) for line in self.lines.values()):
                break
            next_t = self._next_event()
            if next_t is None or next_t > self.end_s:
                break
            self._decay(next_t - t)
            t = next_t
        return Forecast(self.now, self.horizon_s, self.starts, self.cycles, self.event_count)

    # -- events -----------------------------------------------------------------------------------

    def _next_event(self) -> float | None:
        while self.promotions and self.starts[self.promotions[0][1]] is not None:
            heapq.heappop(self.promotions)  # the job started before its promotion
        times = [self.promotions[0][0]] if self.promotions else []
        while self.events:
            at, job_id = self.events[0]
            if job_id == -1 or job_id in self.running:
                times.append(at)
                break
            heapq.heappop(self.events)
        return min(times, default=None)

    def _end_jobs_until(self, t: float) -> None:
        while self.events and self.events[0][0] <= t:
            _, job_id = heapq.heappop(self.events)
            self.event_count += 1
            job = self.running.pop(job_id, None)
            if job is not None:
                self.fleet.release_placement(job.placement, job)
                self.ledger.remove(job)
                self.none_may_start = False

    def _promote_until(self, t: float) -> None:
        while self.promotions and self.promotions[0][0] <= t:
            _, job_id, queue_name = heapq.heappop(self.promotions)
            if self.starts[job_id] is None:
                self.lines[queue_name].promote(job_id)

    def _decay(self, elapsed_s: float) -> None:
        in_use: dict[str, int] = {}
        for job in self.running.values():
            in_use[job.queue] = in_use.get(job.queue, 0) + job.gpus
        half_life = self.config.usage_half_life_s
        for name in self.snapshot.queues:
            self.usage[name] = decay_usage(self.usage.get(name, 0.0), in_use.get(name, 0), elapsed_s, half_life)

    # -- the jobs that can matter to this cycle ---------------------------------------------------

    def _admissible(self, t: float) -> dict[str, dict[tuple, bool]]:
        """Per queue, per shape with jobs still waiting: may one of its jobs start at the start of this cycle?"""
        fits_cache: dict[tuple, bool] = {}
        result = {}
        for name, line in self.lines.items():
            if line.queue is None or len(line.skipped) == len(line.jobs):
                continue
            admissible = {}
            for key, positions in line.by_key.items():
                first = self._first_waiting(line, key)
                if first is not None:
                    admissible[key] = self._may_start(line.jobs[positions[first]], fits_cache)
            result[name] = admissible
        return result

    def _candidates(self, t: float, admissible: dict[str, dict[tuple, bool]], caps: dict[tuple, int]) -> list[Job]:
        chosen: list[Job] = []
        for name, by_key in admissible.items():
            line = self.lines[name]
            if line.queue.strategy is QueueingStrategy.STRICT_FIFO:
                picked = self._strict_reach(line, by_key, t) | set(self._drain_search(line))
                picked |= self._checkpointing(line)
            else:
                picked = self._best_effort(line, name, by_key, t, caps)
            chosen.extend(line.jobs[i] for i in sorted(picked))
        return chosen

    def _best_effort(self, line: _QueueLine, name: str, admissible: dict[tuple, bool], t: float, caps: dict) -> set[int]:
        """The queue's head, the first `cap` waiting jobs of every shape that may start, the jobs refused that may
        still steer the cycle (_reservations, _drain_search, _checkpointing), and the job right after each
        job that may be admitted (the fair-share key re-ranks a queue by the job at its cursor, whatever its shape)."""
        picked: set[int] = set()
        for key, ok in admissible.items():
            if ok:
                passed, upto = self._first_of_shape(line, key, t, count=caps.get((name, key), INITIAL_CAP))
                self.capped[name, key] = passed, upto
                picked.update(passed)
        head = line.next_waiting(0)
        if head is not None:
            picked.add(head)
        picked.update(self._reservations(line, admissible, t))
        picked.update(self._drain_search(line))
        picked.update(self._checkpointing(line))
        for i in [i for i in picked if admissible[line.shapes[i]]]:
            after = line.next_waiting(i + 1)
            if after is not None:
                picked.add(after)
        return picked

    def _reservations(self, line: _QueueLine, admissible: dict[tuple, bool], t: float) -> list[int]:
        """Of every shape and every band of it (priority, service level), the leading starving jobs up to the first the
        cycle surely does not pass over (SchedulerConfig.starvation_after_s; core.queue_stops.stops_queue): refused,
        that one blocks the rest of its queue, in the full cycle as in this one; the ones before it may be passed over
        (of a capped priority class: they are passed too). Usage only grows in a forward cycle, so a job that may not
        reserve at its start never may during it. Within one band a shape's jobs go by submit time, so the starving
        ones lead it. A shape that surely cannot start stops at its first such job: its later jobs are behind it. One
        that may start is searched in every band: once one of its jobs is refused, so are the rest, and a starving one
        further back than those passed (_first_of_shape) would stop the queue."""
        if self.config.starvation_after_s is None:
            return []
        before, found = starving_before(t, self.config), []
        for key, may_start in admissible.items():
            positions, bands = line.by_key[key], line.bands[key]
            for start, end in zip(bands, [*bands[1:], len(positions)]):
                leading = (positions[k] for k in range(max(start, line.cursor[key]), end))
                starving = takewhile(lambda i: is_starving(line.jobs[i], line.queue, self.ledger, before), leading)
                passed, reaches_checks = self._up_to_first_checked(line, starving, t)
                found += passed
                if reaches_checks and not may_start:
                    break
        return found

    def _up_to_first_checked(self, line: _QueueLine, positions: Iterable[int], t: float) -> tuple[list[int], bool]:
        """The waiting jobs at `positions` up to the first the cycle surely does not pass over (backing off or of a
        capped priority class: core.queue_stops.may_be_passed_over), those backing off left out; and whether there is
        such a first one."""
        found, caps = [], self.snapshot.priority_class_caps
        for i in positions:
            job = line.jobs[i]
            if i in line.skipped or is_backing_off(job, t):
                continue
            found.append(i)
            if not may_be_passed_over(job, t, caps):
                return found, True
        return found, False

    def _drain_search(self, line: _QueueLine) -> list[int]:
        """Where the cycle looks for the gang to drain for (core.drain.choose_drain) when the queue's team is
        under-served: its first GANGS_LOOKED_AT waiting jobs. Passed whole, they show the cycle the gang the full cycle
        drains for, and no other: a gang further back, passed for another reason, would come within the cycle's first
        GANGS_LOOKED_AT and be drained for."""
        if line.queue.team not in self.underserved:
            return []
        return line.first_waiting(GANGS_LOOKED_AT)

    def _checkpointing(self, line: _QueueLine) -> set[int]:
        """Under uncheckpointed_borrowers_last, the queue's first waiting job that checkpoints: the core puts a queue
        whose next job would borrow without checkpoints after the others of a cohort where any pending job checkpoints
        (cycle.cohorts_where_checkpointing_jobs_wait), whether or not that job may start."""
        first = line.first_waiting_checkpointing() if self.config.uncheckpointed_borrowers_last else None
        return set() if first is None else {first}

    def _first_of_shape(self, line: _QueueLine, key: tuple, t: float, *, count: int) -> tuple[list[int], int]:
        """The first `count` waiting jobs of `key` that are not backing off (and those backing off among them), and
        where in `by_key[key]` they end."""
        positions = line.by_key[key]
        k = line.cursor[key]
        passed, taken = [], 0
        while k < len(positions) and taken < count:
            i = positions[k]
            k += 1
            if i in line.skipped:
                continue
            passed.append(i)
            if not is_backing_off(line.jobs[i], t):
                taken += 1
        return passed, k

    def _first_waiting(self, line: _QueueLine, key: tuple) -> int | None:
        positions = line.by_key[key]
        k = line.cursor[key]
        while k < len(positions) and positions[k] in line.skipped:
            k += 1
        line.cursor[key] = k
        return k if k < len(positions) else None

    def _may_start(self, job: Job, fits_cache: dict) -> bool:
        """Whether a job of the job's (queue, shape) may pass quota and placement now."""
        quota_key = (job.queue, job.flavor, job.gpus, job.is_preemptible)
        ok = fits_cache.get(quota_key)
        if ok is None:
            ok = fits_cache[quota_key] = self.ledger.fits(job)
        if not ok:
            return False
        shape = job.shape
        ok = fits_cache.get(shape)
        if ok is None:
            ok = fits_cache[shape] = self.fleet.fits(job)
        return ok

    def _strict_reach(self, line: _QueueLine, admissible: dict, t: float) -> set[int]:
        """A strict FIFO queue as far as the cycle can reach into it (core.queue_stops.strict_fifo_reach): every
        waiting job up to the first that surely stops the queue."""
        reach = strict_fifo_reach(line.waiting(), room_gpus=self.free_gpus, now=t,
                                  class_caps=self.snapshot.priority_class_caps,
                                  may_start=lambda job: admissible.get(failure_key(job), False))
        return {line.position[job.id] for job in reach}

    # -- one cycle --------------------------------------------------------------------------------

    def _cycle(self, t: float) -> None:
        """The full cycle's admissions at `t`, from a cycle over the jobs that can matter (_candidates). Of each (queue,
        shape) that may start, the cycle is passed the first INITIAL_CAP waiting jobs, or as many as an earlier instant
        needed (last_caps); where that may have cut it short (_cut_short), its admissions are dropped and it runs again
        from the same state with four times as many of those shapes passed. A dropped cycle leaves no trace: the cycle
        only reads the forecast's state, and the core's base state (cycle._BASE_BY_THREAD) follows the running jobs
        it is given, which change only once admissions are applied below.

        Why the admissions of a cycle not cut short are the full cycle's: the two take the same steps as long as every
        job the full cycle reaches and admits is passed, and so is every job it refuses that steers what follows —
        stops its queue, ranks it, is drained for, or orders the cohort (_best_effort); a quota refusal the core keeps
        for every shape of its size (cycle.quota_failures) is the one each of them would get then anyway, as quota
        reads only the queue, flavor, GPUs and whether the job may borrow. Of a (queue, shape) cut off by its cap, the jobs not passed come after those passed, and in a
        cycle not cut short one of those was refused for a reason that holds for the rest of the cycle: the core keeps
        a (queue, shape)'s quota or fit failure until the cycle ends (cycle.known_failures; capacity only shrinks
        without preemption), and a queue stopped behind a job stays stopped. So the full cycle refuses them too, and
        refused they could steer it only by stopping their queue behind a starvation reservation, for which the
        leading starving jobs of every band are passed (_reservations). A job only passed over (backing off, or over
        its priority class's cap: PASSED_OVER) says nothing of the rest of its shape, so it settles nothing."""
        if self.none_may_start:
            return
        admissible = self._admissible(t)
        if not any(any(by_key.values()) for by_key in admissible.values()):
            # A cycle would admit nothing (a drain only keeps jobs off, and lasts one cycle), until a job ends.
            self.none_may_start = True
            return
        self.free_gpus = sum(max(0, f) for i, f in enumerate(self.fleet.free) if self.fleet.is_schedulable[i])
        self.underserved = (underserved_teams(self.snapshot.queues, self.usage)
                            if self.config.drain_for_underserved_gangs else set())
        caps: dict[tuple, int] = dict(self.last_caps)
        while True:
            self.capped = {}
            pending = self._candidates(t, admissible, caps)
            self.cycles += 1
            result = run_admission_cycle(Snapshot(
                now=t,
                topology=self.snapshot.topology,
                nodes=self.snapshot.nodes,
                queues=self.snapshot.queues,
                admitted=tuple(self.running.values()),  # the same objects every cycle: the core applies only changes
                pending=tuple(pending),
                historical_usage=self.usage,
                priority_class_caps=self.snapshot.priority_class_caps,
                config=self.config,
            ))
            cut_short = self._cut_short(result)
            if not cut_short:
                break
            for name_key in cut_short:
                caps[name_key] = caps.get(name_key, INITIAL_CAP) * 4
        self.last_caps = {k: v for k, v in caps.items() if v > INITIAL_CAP}
        by_id = {job.id: job for job in pending}
        for admission in result.admissions:
            job = by_id[admission.job_id]
            self.starts[job.id] = t
            line = self.lines[job.queue]
            line.skipped.add(line.position[job.id])
            started = replace(job, state=JobState.RUNNING, placement=admission.placement, admitted_at=t,
                              started_at=t, are_pods_ready=True)
            self._hold(started, since=t)
            self.ledger.add(started)

    def _cut_short(self, result: CycleResult) -> list[tuple]:
        """The (queue, shape) pairs the cycle may have been cut short on: more of their jobs wait than were passed, and
        none of those passed was refused for a reason that holds for the rest (each started, or was only passed over:
        PASSED_OVER)."""
        verdicts = result.pending.by_job()
        cut_short = []
        for (name, key), (passed, upto) in self.capped.items():
            line = self.lines[name]
            positions = line.by_key[key]
            if all(positions[k] in line.skipped for k in range(upto, len(positions))):
                continue
            jobs = line.jobs
            if all(jobs[i].id not in verdicts or verdicts[jobs[i].id][0] in PASSED_OVER for i in passed):
                cut_short.append((name, key))
        return cut_short
