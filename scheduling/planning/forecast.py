"""Start estimates: the live admission cycle run forward on virtual time from a snapshot.

Like Slurm's `squeue --start`: running jobs end at their runtime limits (a job without one holds its
GPUs past the horizon), and at every end event the pending jobs are admitted by the same
`run_admission_cycle`, in the same order, as the reconciler would. A job admitted at virtual time t is
estimated to start at t; a job not admitted within the horizon (default 7 days) gets None.

The forecast runs without preemption and without suspending idle jobs: preemption plans that need approval may
never be approved, and the cheap ones run on the next pass anyway; the estimate is what *waiting* gives. Nor with
drains for under-served gangs (an admin's option): the pruning below passes a cycle only the jobs that can start,
and a drain is chosen for a gang that cannot, so under that option the estimates of jobs that would borrow are early
and the drained-for gang's late (not yet modelled). Each queue keeps the order it has now: a job that ran before and
goes back to the first attained-service level within the horizon (SchedulerConfig.promote_after_waiting) keeps its
place, so its estimate is late (not yet modelled either).

Why it is fast enough for 100,000 pending jobs (a cycle only at end events, and only over the jobs
that can matter): without preemption and with every gang ready, a cycle only takes capacity, and quota
checks and gang fits are monotone (less free capacity never makes a failed check pass). So a job whose
(queue, shape) fails quota or placement at the start of a cycle fails throughout it, and is left out —
except where it steers the cycle: each queue's head and the job right after every job that may be
admitted (the fair-share key re-ranks a queue by the job at its cursor), in a strict FIFO queue every
job up to its first blocked one, and in a best-effort queue every job that may take a starvation
reservation, up to the first that surely cannot start. Of each (queue, shape) that may start, the first
two waiting jobs are passed; when all of them start, those admissions stand and another cycle follows at
the same instant with four times as many passed, as the next reconcile pass would a few seconds later.
So the forecast gives the full cycle's answer, except at an instant where more jobs of one (queue, shape)
start than were passed: there a job of another shape may go first (the live pass, which reads a capped
number of pending jobs per queue, behaves the same way).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Iterator, Mapping

from scheduling.core.attained import NO_SERVICE_ORDER, ServiceOrder
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.fairshare import decay_usage, sort_queue
from scheduling.core.model import Job, JobState, Queue, QueueingStrategy, Snapshot
from scheduling.core.placement import fleet_state_for
from scheduling.core.quota import QuotaLedger
from scheduling.core.queue_stops import is_backing_off, may_be_passed_over, strict_fifo_reach
from scheduling.core.starvation import is_starving, starving_before

DEFAULT_HORIZON_S = 7 * 24 * 3600.0
INITIAL_CAP = 2
"""Jobs of one (queue, shape) passed to a cycle at first; four times more while they all start."""


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


@dataclass
class _QueueLine:
    """One queue's pending jobs in the core's order, with each shape's positions."""

    queue: Queue | None
    jobs: list[Job]
    service: ServiceOrder = NO_SERVICE_ORDER
    """The core's attained-service order at the snapshot's time: part of the queue's order."""
    by_key: dict[tuple, list[int]] = field(default_factory=dict)
    cursor: dict[tuple, int] = field(default_factory=dict)
    started: set[int] = field(default_factory=set)
    """Positions of jobs already admitted."""
    position: dict[int, int] = field(default_factory=dict)
    bands: dict[tuple, list[int]] = field(default_factory=dict)
    """Per shape: where each band of the order (priority, service level) begins in `by_key[shape]`; within a band
    jobs go by submit time."""

    def __post_init__(self) -> None:
        sort_queue(self.jobs, self.service)
        last_band: dict[tuple, tuple] = {}
        for i, job in enumerate(self.jobs):
            key = job.shape
            positions = self.by_key.setdefault(key, [])
            band = (job.priority, self.service.pending_level(job))
            if not positions or last_band[key] != band:
                self.bands.setdefault(key, []).append(len(positions))
                last_band[key] = band
            positions.append(i)
            self.position[job.id] = i
        self.cursor = dict.fromkeys(self.by_key, 0)

    def waiting(self) -> Iterator[Job]:
        """The jobs not yet admitted, in order."""
        return (job for i, job in enumerate(self.jobs) if i not in self.started)

    def next_waiting(self, i: int) -> int | None:
        while i < len(self.jobs) and i in self.started:
            i += 1
        return i if i < len(self.jobs) else None


class _Forward:
    def __init__(self, snapshot: Snapshot, horizon_s: float) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now
        self.horizon_s = horizon_s
        self.end_s = snapshot.now + horizon_s
        self.config = replace(snapshot.config, preemption_enabled=False, suspend_idle_jobs=False,
                              drain_for_underserved_gangs=False)
        self.starts: dict[int, float | None] = {job.id: None for job in snapshot.pending}
        self.running: dict[int, Job] = {}
        self.last_caps: dict[tuple, int] = {}
        self.events: list[tuple[float, int]] = []
        """(time, job id) of ends; job id -1 marks a wake-up (a backoff ends)."""
        self.fleet = fleet_state_for(snapshot)
        for job in snapshot.admitted:
            job = job if job.are_pods_ready else replace(job, are_pods_ready=True)
            since = job.started_at if job.started_at is not None else job.admitted_at
            self._hold(job, since=snapshot.now if since is None else since)
        self.ledger = QuotaLedger(snapshot.queues, self.running.values())
        by_queue: dict[str, list[Job]] = {}
        for job in snapshot.pending:
            by_queue.setdefault(job.queue, []).append(job)
            if job.backoff_until is not None and self.now < job.backoff_until <= self.end_s:
                heapq.heappush(self.events, (job.backoff_until, -1))
        service = ServiceOrder.at(self.config, snapshot.now)
        self.lines = {name: _QueueLine(snapshot.queues.get(name), jobs, service) for name, jobs in by_queue.items()}
        self.usage = dict(snapshot.historical_usage)
        self.cycles = 0
        self.event_count = 0

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
            self._cycle(t)
            if not any(len(line.started) < len(line.jobs) for line in self.lines.values()):
                break
            next_t = self._next_event()
            if next_t is None or next_t > self.end_s:
                break
            self._decay(next_t - t)
            t = next_t
        return Forecast(self.now, self.horizon_s, self.starts, self.cycles, self.event_count)

    # -- events -----------------------------------------------------------------------------------

    def _next_event(self) -> float | None:
        while self.events:
            at, job_id = self.events[0]
            if job_id == -1 or job_id in self.running:
                return at
            heapq.heappop(self.events)
        return None

    def _end_jobs_until(self, t: float) -> None:
        while self.events and self.events[0][0] <= t:
            _, job_id = heapq.heappop(self.events)
            self.event_count += 1
            job = self.running.pop(job_id, None)
            if job is not None:
                self.fleet.release_placement(job.placement, job)
                self.ledger.remove(job)

    def _decay(self, elapsed_s: float) -> None:
        in_use: dict[str, int] = {}
        for job in self.running.values():
            in_use[job.queue] = in_use.get(job.queue, 0) + job.gpus
        half_life = self.config.usage_half_life_s
        for name in self.snapshot.queues:
            self.usage[name] = decay_usage(self.usage.get(name, 0.0), in_use.get(name, 0), elapsed_s, half_life)

    # -- the jobs that can matter to this cycle ---------------------------------------------------

    def _admissible(self, t: float) -> dict[str, dict[tuple, bool]]:
        """Per queue, per shape with jobs still waiting: may its next job start at the start of this cycle?"""
        fits_cache: dict[tuple, bool] = {}
        result = {}
        for name, line in self.lines.items():
            if line.queue is None or len(line.started) == len(line.jobs):
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
                picked = self._strict_reach(line, by_key, t)
            else:
                picked = self._best_effort(line, name, by_key, t, caps)
            chosen.extend(line.jobs[i] for i in sorted(picked))
        return chosen

    def _best_effort(self, line: _QueueLine, name: str, admissible: dict[tuple, bool], t: float, caps: dict) -> set[int]:
        """The queue's head, the first `cap` waiting jobs of every shape that may start, and the job right after
        each of them when that job cannot start (the fair-share key re-ranks a queue by the job at its cursor)."""
        picked: set[int] = set()
        passed_upto: dict[tuple, int] = {}
        for key, ok in admissible.items():
            if ok:
                picked.update(self._extend(line, key, passed_upto, t, count=caps.get((name, key), INITIAL_CAP)))
        head = line.next_waiting(0)
        if head is not None:
            picked.add(head)
        picked.update(self._reservations(line, admissible, t))
        for i in list(picked):
            after = line.next_waiting(i + 1)
            if after is not None and not admissible.get(line.jobs[after].shape, False):
                picked.add(after)
        self.passed[name] = passed_upto
        return picked

    def _reservations(self, line: _QueueLine, admissible: dict[tuple, bool], t: float) -> list[int]:
        """Of every shape that surely cannot start, the first job that surely takes a reservation
        (SchedulerConfig.starvation_after_s; core.queue_stops.stops_queue): it blocks the rest of its queue, in
        the full cycle as in this one, and so do the starving jobs before it that the cycle may pass over (of a capped
        priority class: they are passed too). Usage only grows in a forward cycle, so a job that may not reserve at its
        start never may during it. Starving jobs whose shape may start are passed, or not, like their shape."""
        if self.config.starvation_after_s is None:
            return []
        before, found, caps = starving_before(t, self.config), [], self.snapshot.priority_class_caps
        for key, may_start in admissible.items():
            if may_start:
                continue
            positions, bands, reserving = line.by_key[key], line.bands[key], None
            for start, end in zip(bands, [*bands[1:], len(positions)]):
                # Within one band (priority, service level) a shape's jobs are in submit order: the starving ones lead it.
                for k in range(max(start, line.cursor[key]), end):
                    i = positions[k]
                    job = line.jobs[i]
                    if (reserving is not None and i >= reserving) or not is_starving(job, line.queue, self.ledger, before):
                        break
                    if i in line.started or is_backing_off(job, t):
                        continue
                    found.append(i)
                    if not may_be_passed_over(job, t, caps):
                        reserving = i
                        break
        return found

    def _extend(self, line: _QueueLine, key: tuple, passed_upto: dict, t: float, *, count: int) -> list[int]:
        """The first `count` waiting jobs of `key` that are not backing off (and those backing off among them)."""
        positions = line.by_key[key]
        k = passed_upto.get(key, line.cursor[key])
        added, taken = [], 0
        while k < len(positions):
            i = positions[k]
            if taken >= count:
                break
            k += 1
            if i in line.started:
                continue
            added.append(i)
            if not is_backing_off(line.jobs[i], t):
                taken += 1
        passed_upto[key] = k
        return added

    def _first_waiting(self, line: _QueueLine, key: tuple) -> int | None:
        positions = line.by_key[key]
        k = line.cursor[key]
        while k < len(positions) and positions[k] in line.started:
            k += 1
        line.cursor[key] = k
        return k if k < len(positions) else None

    def _may_start(self, job: Job, fits_cache: dict) -> bool:
        quota_key = (job.queue, job.flavor, job.gpus)
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
                                  may_start=lambda job: admissible.get(job.shape, False))
        return {line.position[job.id] for job in reach}

    def _truncated_and_all_admitted(self, admitted: set[int]) -> list[tuple]:
        """Shapes whose every passed job started: more of them might have, so pass more and decide again."""
        grow = []
        for name, passed_upto in self.passed.items():
            line = self.lines[name]
            for key, upto in passed_upto.items():
                positions = line.by_key[key]
                if upto >= len(positions):
                    continue
                waiting = [line.jobs[positions[k]].id for k in range(line.cursor[key], upto) if positions[k] not in line.started]
                if waiting and all(job_id in admitted for job_id in waiting):
                    grow.append((name, key))
        return grow

    # -- one cycle --------------------------------------------------------------------------------

    def _cycle(self, t: float) -> None:
        """A cycle over the jobs that can matter. When every passed job of some shape started, more of that shape
        might have: those admissions stand and another cycle follows at the same instant with more of them passed,
        as the next reconcile pass would a few seconds later."""
        caps: dict[tuple, int] = dict(self.last_caps)
        while True:
            admissible = self._admissible(t)
            if not any(any(by_key.values()) for by_key in admissible.values()):
                break  # nothing may start: a cycle would admit nothing
            self.free_gpus = sum(max(0, f) for i, f in enumerate(self.fleet.free) if self.fleet.is_schedulable[i])
            self.passed: dict[str, dict] = {}
            pending = self._candidates(t, admissible, caps)
            self.cycles += 1
            snapshot = Snapshot(
                now=t,
                topology=self.snapshot.topology,
                nodes=self.snapshot.nodes,
                queues=self.snapshot.queues,
                admitted=tuple(self.running.values()),  # the same objects every cycle: the core applies only changes
                pending=tuple(pending),
                historical_usage=self.usage,
                priority_class_caps=self.snapshot.priority_class_caps,
                config=self.config,
            )
            result = run_admission_cycle(snapshot)
            admitted = {a.job_id for a in result.admissions}
            grow = self._truncated_and_all_admitted(admitted)
            by_id = {job.id: job for job in pending}
            for admission in result.admissions:
                job = by_id[admission.job_id]
                self.starts[job.id] = t
                line = self.lines[job.queue]
                line.started.add(line.position[job.id])
                started = replace(job, state=JobState.RUNNING, placement=admission.placement, admitted_at=t,
                                  started_at=t, are_pods_ready=True)
                self._hold(started, since=t)
                self.ledger.add(started)
            if not grow:
                break
            for name_key in grow:
                caps[name_key] = caps.get(name_key, INITIAL_CAP) * 4
        self.last_caps = {k: v for k, v in caps.items() if v > INITIAL_CAP}
