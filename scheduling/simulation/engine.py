"""The discrete-event engine: the live admission cycle, run on virtual time over a trace.

Events are job arrivals, job ends (at the job's *true* remaining work, which the scheduler never
sees), wake-ups (an evicted gang's backoff ends, or a plan put off until a checkpoint is due:
`CycleResult.recheck_at`) and quota changes. All events at one timestamp are
applied together, then — if anything is pending — one `run_admission_cycle` decides, exactly as the
reconciler would. Admitted gangs start at once with all pods ready. A preempted victim loses the
work since its last checkpoint, pays the restart overhead when it next starts, and rejoins the
queue keeping its submit time.

Skipping cycles that cannot change anything (what makes a 68,503-job replay take seconds):

1. **Nothing pending → no cycle.** With every gang ready, a cycle over an empty pending list
   decides nothing.
2. **Only arrivals, no preemption → only the arrived jobs' queues.** Every job that was pending
   after the previous cycle failed quota or placement on that cycle's final state. Since then no
   GPUs were freed and no quota changed, and admitting a job only takes capacity: quota checks
   and gang fits are monotone (less free capacity never makes a failed check pass — a gang of
   equal pods fits iff the greedy best fit fits, and fewer free GPUs per node never helps), so
   those jobs fail again whatever this cycle admits first, and considering them changes nothing.
   The queues that received arrivals are passed *whole*, so strict FIFO (a new job waits behind
   its queue's blocked head) and the order across queues (the fair-share key breaks ties by each
   queue's head job) are exactly those of a full cycle.
3. **Preemption enabled → every cycle is full** (whenever something is pending). A preemption
   plan depends on more than free capacity — which jobs are protected (admitted in this very
   cycle), which queues borrow right now, displacement costs that grow with time — so an old
   pending job may succeed where it failed before even when no GPUs were freed. So with idle
   jobs suspended (SchedulerConfig.suspend_idle_jobs): a cycle frees GPUs when a job turns idle; and with drains
   (SchedulerConfig.drain_for_underserved_gangs): a job kept off a drain fits in the first cycle after the
   drained-for gang starts.

4. **Strict FIFO without preemption → only what the cycle can reach of each queue.** A strict FIFO
   queue stops at its first blocked job, and a cycle without preemption can give its jobs at most the
   F free GPUs (a queue without a cohort at most its unused nominal quota R too): the core's
   `queue_stops.strict_fifo_reach` with room min(F, R) names the jobs up to where the queue surely
   stops. The jobs after it would only be reported as waiting, so passing the reach gives the same
   admissions as passing the whole queue.

On a beat (`Scenario.cycle_interval_s`), cycles run only on its multiples, as a reconciler without on-demand passes:
what happens between two beats waits for the next one, and one cycle serves it all (the rules above then count
everything since the previous cycle). Under contention with checkpointing jobs every blocked queue head plans a
preemption in every cycle, so the number of cycles sets the cost of a replay: a one-minute beat makes a dense day of
the gaming scenario about five times cheaper.

The engine checks what the core does not have to: no node is ever over-committed.

Over 400 lines for a reason: the event loop and the cycle-skipping rules above share the run's pending queues and
clock; the scheduling itself is the core's, the policies are policies.py's.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Callable, Mapping

from scheduling.core.attained import ServiceOrder
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.fairshare import decay_usage, job_order_key
from scheduling.core.model import Job, JobState, PlannedPreemption, PodSet, Queue, QueueingStrategy, Snapshot, TopologyRequest
from scheduling.core.queue_stops import strict_fifo_reach
from scheduling.core.reach import EmptyFleet, cohort_pool, why_never_admitted
from scheduling.simulation.fleet import Fleet
from scheduling.simulation.policies import Policy
from scheduling.simulation.trace import Trace, TraceJob

END, CANCEL, QUOTA, WAKE, ARRIVAL, TICK = 0, 1, 2, 3, 4, 5
"""Event kinds, in the order they apply within one timestamp: capacity is freed before jobs arrive, and a periodic
cycle (TICK, Scenario.cycle_interval_s) sees everything that happened at its time."""
SAMPLE_S = 3600.0
MAX_APPROVAL_ROUNDS = 4


class SimulationError(RuntimeError):
    """The engine found an impossible state (an over-committed node, an unknown job)."""


@dataclass(frozen=True, slots=True)
class QuotaChange:
    at_s: float
    team: str
    flavor: str
    gpus: int


@dataclass(frozen=True)
class Scenario:
    trace: Trace
    fleet: Fleet
    quotas: Mapping[str, Mapping[str, int]]
    """Team → flavor → nominal GPUs."""
    quota_changes: tuple[QuotaChange, ...] = ()
    checkpoint_interval_s: int | None = None
    """Applied to every job (Philly records none); None = a preempted job restarts from scratch."""
    name: str = ""
    queue_teams: Mapping[str, str] = field(default_factory=dict)
    """Queue → team for quota entries that are extra queues of a team (`quotas` is then keyed by queue)."""
    priority_class_caps: Mapping[str, int] = field(default_factory=dict)
    """Per priority class: the GPUs each team may hold at once at it (Snapshot.priority_class_caps)."""
    cycle_interval_s: float | None = None
    """None: a cycle at every event time, as the reconciler's on-demand pass (on every submission and end). A period:
    cycles only on its multiples, as a reconciler on a beat alone (GANGWAY_RECONCILE_INTERVAL_S without
    GANGWAY_RECONCILE_ON_WRITE): what happens in between waits for the next beat."""


@dataclass(slots=True)
class JobRecord:
    id: int
    team: str
    gpus: int
    submit_s: float
    duration_s: float
    remaining_s: float
    first_start_s: float | None = None
    end_s: float | None = None
    waited_s: float = 0.0
    """Total time pending: before the first start and after every preemption or eviction."""
    pending_since: float = 0.0
    runs: int = 0
    preemptions: int = 0
    served_gpu_s: float = 0.0
    lost_gpu_s: float = 0.0
    run_started_s: float = 0.0
    run_overhead_s: float = 0.0
    overhead_due_s: float = 0.0
    generation: int = 0
    rejected: str = ""
    idle_hold_s: float = 0.0
    """GPUs kept idle after the work (TraceJob.idle_hold_s)."""
    work_end_s: float | None = None
    """When the job's work was done (before any idle hold)."""
    work_gpu_s_in_span: float = 0.0
    """GPU-seconds of the job's work done before the trace's last submission (SimResult.horizon_s) and kept: not the
    restart overhead, work lost to a preemption, or an idle hold. The job's share of the fleet while the whole trace's
    demand was there, counted as it ran (a job that ends after the horizon counts its part before it)."""
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    allocated_gpus: int
    whole_free_nodes: int
    pending_jobs: int
    pending_gpus: int


@dataclass
class SimResult:
    policy: str
    records: dict[int, JobRecord]
    samples: list[Sample]
    total_gpus: int
    total_nodes: int
    horizon_s: float
    events: int = 0
    cycles: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    """CPU time of this process: the figure to compare on a shared machine."""
    preemptions: int = 0
    allocated_gpu_s: float = 0.0
    whole_free_node_s: float = 0.0
    log: list[tuple] = field(default_factory=list)


class Engine:
    def __init__(self, scenario: Scenario, policy: Policy, *, log: bool = False, always_full: bool = False) -> None:
        """`always_full`: pass every pending job to every cycle (no skipping; for tests of the skipping rules)."""
        self.scenario = scenario
        self.policy = policy
        self.config = policy.config
        self.quotas = {team: dict(per) for team, per in scenario.quotas.items()}
        for job in scenario.trace.jobs:
            self.quotas.setdefault(job.queue or job.team, {})
        self.queues: dict[str, Queue] = policy.queues(self.quotas, self.scenario.queue_teams)
        self.nodes = policy.nodes(scenario.fleet, self.quotas)  # one tuple for the whole run
        self.topology = scenario.fleet.topology
        self.flavor = scenario.fleet.main_flavor
        self.width = {flavor: scenario.fleet.node_width(flavor) for flavor in scenario.fleet.gpus_by_flavor()}
        self.node_index = {node.name: i for i, node in enumerate(self.nodes)}
        self.free = [node.allocatable_gpus - node.external_gpus for node in self.nodes]
        self.whole = [node.allocatable_gpus for node in self.nodes]
        self.schedulable = [node.is_ready and not node.is_cordoned for node in self.nodes]
        self.whole_free = sum(1 for i, f in enumerate(self.free) if f == self.whole[i] and self.schedulable[i])
        self.allocated = 0
        self.trace_jobs = {job.id: job for job in scenario.trace.jobs}
        self.records: dict[int, JobRecord] = {}
        self.pending: dict[str, dict[int, Job]] = {name: {} for name in self.queues}
        self.in_order = {name: True for name in self.queues}
        self.last_key: dict[str, tuple] = {}
        self.order_without_promotion = ServiceOrder(self.config.service_levels_gpu_h)
        """The queues' order at insertion; a job that may be promoted later marks its queue unsorted (_enqueue)."""
        self.n_pending = 0
        self.pending_gpus = 0
        self.running: dict[int, Job] = {}
        self.in_use = {name: 0 for name in self.queues}
        self.usage = {name: 0.0 for name in self.queues}
        self.log_enabled = log
        self.always_full = always_full
        self.reopens_failures = (self.config.preemption_enabled or self.config.suspend_idle_jobs
                                 or self.config.drain_for_underserved_gangs)
        """Whether a job that failed the last cycle may pass the next with no GPUs freed by an end (rule 3): a cycle
        may free GPUs, or the gang a drain held jobs back for may have started; otherwise a cycle only takes capacity."""
        self.result = SimResult(
            policy.name, self.records, [], sum(self.whole), len(self.nodes),
            horizon_s=max((j.submit_s for j in scenario.trace.jobs), default=0.0),
        )
        self.now = 0.0
        self.next_sample = 0.0
        self.heap: list[tuple] = []
        self.empty_fleet = EmptyFleet(self.nodes, self.topology, topology_aware=self.config.topology_aware)
        self.awaiting: dict[int, PlannedPreemption] = {}
        """Plans the simulated admin has not decided, kept for the next cycle as the live pass keeps them."""

    # --- the loop --------------------------------------------------------------------------

    def run(self, progress: Callable[[int, int], None] | None = None) -> SimResult:
        started, cpu_started = time.perf_counter(), time.process_time()
        heap = self.heap
        for job in self.scenario.trace.jobs:
            heap.append((job.submit_s, ARRIVAL, job.id, 0))
        for job in self.scenario.trace.jobs:
            if job.cancel_at_s is not None:
                heap.append((job.cancel_at_s, CANCEL, job.id, 0))
        for k, change in enumerate(self.scenario.quota_changes):
            heap.append((change.at_s, QUOTA, k, 0))
        heapq.heapify(heap)
        total = 2 * len(self.scenario.trace.jobs)
        full_cycles = self.reopens_failures or self.always_full
        interval = self.scenario.cycle_interval_s
        batches = 0
        # What happened since the last cycle: with a beat, it builds up between beats.
        freed = happened = False
        arrived: set[str] = set()
        next_beat = None
        while heap:
            t = heap[0][0]
            self._advance(t)
            is_beat = False
            while heap and heap[0][0] == t:
                _, kind, key, generation = heapq.heappop(heap)
                self.result.events += 1
                if kind == END:
                    if self.records[key].generation == generation and key in self.running:
                        self._finish(key, t)
                        freed = happened = True
                elif kind == CANCEL:
                    freed = self._cancel(key, t) or freed
                    happened = True
                elif kind == ARRIVAL:
                    queue = self._arrive(self.trace_jobs[key], t)
                    happened = True
                    if queue is not None:
                        arrived.add(queue)
                elif kind == QUOTA:
                    self._change_quota(self.scenario.quota_changes[key])
                    freed = happened = True
                elif kind == TICK:
                    is_beat, next_beat = True, None
                else:  # WAKE
                    freed = happened = True
            is_due = self.n_pending and (freed or arrived or (self.always_full and happened))
            if is_due and interval is not None and not is_beat:
                if next_beat is None:
                    next_beat = math.ceil(t / interval) * interval
                    heapq.heappush(heap, (next_beat, TICK, 0, 0))
            else:
                if is_due:
                    self._cycle(t, full=freed or full_cycles, arrived=arrived)
                freed = happened = False
                arrived = set()
            batches += 1
            if progress is not None and batches % 2000 == 0:
                progress(self.result.events, total)
        self._advance(self.now)
        if progress is not None:
            progress(self.result.events, total)
        self.result.wall_s = time.perf_counter() - started
        self.result.cpu_s = time.process_time() - cpu_started
        return self.result

    def _advance(self, t: float) -> None:
        """Account for the time since the last event: allocation, whole free nodes, decayed usage."""
        dt = t - self.now
        while self.next_sample <= t:
            self.result.samples.append(
                Sample(self.next_sample, self.allocated, self.whole_free, self.n_pending, self.pending_gpus)
            )
            self.next_sample += SAMPLE_S
        if dt <= 0:
            return
        self.result.allocated_gpu_s += self.allocated * dt
        self.result.whole_free_node_s += self.whole_free * dt
        if self.policy.fair_share_history:
            half_life = self.config.usage_half_life_s
            for name, used in self.usage.items():
                self.usage[name] = decay_usage(used, self.in_use[name], dt, half_life)
        self.now = t

    # --- one admission cycle ----------------------------------------------------------------

    def _cycle(self, t: float, *, full: bool, arrived: set[str]) -> None:
        approved: dict[int, frozenset[int]] = {}
        for _ in range(MAX_APPROVAL_ROUNDS):
            names = self.pending if full else arrived
            room_gpus = None if self.always_full or self.reopens_failures else sum(self.free)
            pending = tuple(chain.from_iterable(self._pending_of(name, room_gpus, t) for name in names))
            snapshot = Snapshot(
                now=t,
                topology=self.topology,
                nodes=self.nodes,
                queues=self.queues,
                admitted=tuple(self.running.values()),
                pending=pending,
                historical_usage=self.usage if self.policy.fair_share_history else {},
                approved_preemptions=approved,
                priority_class_caps=self.scenario.priority_class_caps,
                awaiting_plans=self.awaiting,
                config=self.config,
            )
            result = run_admission_cycle(snapshot)
            self.awaiting = {p.plan.job_id: p for p in result.preemptions if p.needs_approval}
            self.result.cycles += 1
            self._apply(result, t)
            if self.policy.approve != "all":
                return
            asks = {
                p.plan.job_id: p.plan.victim_ids
                for p in result.preemptions
                if p.needs_approval and p.plan.job_id not in self.running and p.plan.victim_ids <= self.running.keys()
            }
            if not asks or not self.n_pending:
                return
            approved, full = asks, True

    def _pending_of(self, name: str, room_gpus: int | None, t: float):
        """A queue's pending jobs; of a strict FIFO queue, only what the cycle can reach with `room_gpus` (rule 4)."""
        jobs = self.pending[name]
        queue = self.queues[name]
        if room_gpus is None or queue.strategy is not QueueingStrategy.STRICT_FIFO:
            return jobs.values()
        if queue.cohort is None:  # alone, it can take at most what is left of its own quota
            room_gpus = min(room_gpus, max(0, sum(q.nominal for q in queue.quotas.values()) - self.in_use[name]))
        if len(jobs) <= room_gpus + 1:
            return jobs.values()  # the whole queue is always right, and this short it is not worth ordering
        service = ServiceOrder.at(self.config, t)
        ordered = jobs.values() if self.in_order[name] else sorted(jobs.values(), key=lambda j: job_order_key(j, service))
        return strict_fifo_reach(ordered, room_gpus=room_gpus, now=t, class_caps=self.scenario.priority_class_caps)

    def _may_be_promoted(self, job: Job) -> bool:
        """Its place may move up while it waits (SchedulerConfig.promote_after_waiting), so insertion order is no proof."""
        return bool(job.attained_gpu_s) and self.config.promote_after_waiting is not None

    def _enqueue(self, job: Job) -> None:
        """Add to the queue's pending jobs, noting whether insertion order is still the core's order."""
        jobs = self.pending[job.queue]
        key = job_order_key(job, self.order_without_promotion)
        if not jobs:
            self.in_order[job.queue] = True
        elif key < self.last_key[job.queue] or self._may_be_promoted(job):
            self.in_order[job.queue] = False
        self.last_key[job.queue] = key
        jobs[job.id] = job
        self.n_pending += 1
        self.pending_gpus += job.gpus

    def _apply(self, result, t: float) -> None:
        if result.recheck_at is not None:
            heapq.heappush(self.heap, (result.recheck_at, WAKE, 0, 0))
        for eviction in result.evictions:
            self._requeue(eviction.job_id, t, backoff_until=eviction.backoff_until)
            heapq.heappush(self.heap, (eviction.backoff_until, WAKE, eviction.job_id, 0))
        for admission in result.admissions:
            for victim in admission.preempted:
                self._requeue(victim, t, preempted_by=admission.job_id)
            self._start(admission.job_id, admission.placement, t)

    # --- job transitions --------------------------------------------------------------------

    def core_job(self, trace_job: TraceJob) -> Job:
        flavor = trace_job.flavor or self.flavor
        interval = self.scenario.checkpoint_interval_s if trace_job.checkpoint_interval_s is None else trace_job.checkpoint_interval_s
        return Job(
            id=trace_job.id,
            queue=trace_job.queue or self.policy.queue_of(trace_job.team),
            team=trace_job.team,
            flavor=flavor,
            pod_sets=pod_sets_for(trace_job, self.width.get(flavor, 0)),
            priority=self.policy.priority(trace_job),
            submitted_at=trace_job.submit_s,
            topology=TopologyRequest(),
            runtime_limit_s=trace_job.runtime_limit_s,
            checkpoint_interval_s=interval or None,
            tolerations=self.policy.tolerations(trace_job.team),
            priority_class=trace_job.priority_class,
        )

    def _arrive(self, trace_job: TraceJob, t: float) -> str | None:
        job = self.core_job(trace_job)
        record = JobRecord(job.id, job.team, job.gpus, trace_job.submit_s, trace_job.duration_s, trace_job.duration_s)
        record.pending_since = t
        record.idle_hold_s = trace_job.idle_hold_s
        self.records[job.id] = record
        reason = self._never_fits(job)
        if reason:
            record.rejected = reason
            self._log(t, "reject", job.id)
            return None
        self._enqueue(job)
        self._log(t, "arrive", job.id)
        return job.queue

    def _never_fits(self, job: Job) -> str:
        """Why the job could never be admitted (the API would refuse it at submission), or ""."""
        queue = self.queues.get(job.queue)
        if queue is None:
            return f"queue {job.queue} has no quota for {job.flavor}"
        pool = cohort_pool(self.queues.values(), queue, job.flavor)
        return why_never_admitted(job, queue, pool=pool, empty_fleet=self.empty_fleet)

    def _start(self, job_id: int, placement, t: float) -> None:
        record = self.records[job_id]
        queue = self.core_queue_of(job_id)
        job = self.pending[queue].pop(job_id, None)
        if job is None:
            raise SimulationError(f"admitted job {job_id} is not pending")
        self.n_pending -= 1
        self.pending_gpus -= job.gpus
        self._take(job, placement, -1)
        self.running[job_id] = replace(
            job,
            state=JobState.RUNNING,
            placement=placement,
            admitted_at=t,
            started_at=t,
            are_pods_ready=True,
            backoff_until=None,
            idle_since=t + record.run_overhead_s + record.remaining_s if record.idle_hold_s else None,
        )
        self.in_use[queue] += job.gpus
        if record.first_start_s is None:
            record.first_start_s = t
        record.waited_s += t - record.pending_since
        record.runs += 1
        record.run_started_s = t
        record.run_overhead_s = record.overhead_due_s
        record.overhead_due_s = 0.0
        record.generation += 1
        heapq.heappush(self.heap, (t + record.remaining_s + record.run_overhead_s + record.idle_hold_s, END, job_id, record.generation))
        if self.log_enabled:
            per_pod = {ps.name: ps.gpus_per_pod for ps in job.pod_sets}
            self._log(t, "start", job_id, tuple((p.node, per_pod[p.pod_set]) for p in placement))

    def _finish(self, job_id: int, t: float) -> None:
        job = self.running.pop(job_id)
        record = self.records[job_id]
        self._take(job, job.placement, +1)
        self.in_use[job.queue] -= job.gpus
        record.served_gpu_s += job.gpus * (t - record.run_started_s)
        record.lost_gpu_s += job.gpus * record.run_overhead_s  # the restart overhead is not useful work
        work_end_s = min(t, record.run_started_s + record.run_overhead_s + record.remaining_s)
        self._count_work(record, job.gpus, work_end_s - record.run_started_s - record.run_overhead_s)
        if record.work_end_s is None:
            record.work_end_s = work_end_s
        record.remaining_s = 0.0
        record.end_s = t
        self._log(t, "end", job_id)

    def _cancel(self, job_id: int, t: float) -> bool:
        """The owner cancels the job: a pending one leaves its queue, a running one frees its GPUs (True)."""
        record = self.records.get(job_id)
        if record is None or record.end_s is not None or record.rejected:
            return False
        record.cancelled = True
        if job_id in self.running:
            self._finish(job_id, t)
            return True
        job = self.pending[self.core_queue_of(job_id)].pop(job_id, None)
        if job is not None:
            self.n_pending -= 1
            self.pending_gpus -= job.gpus
            record.waited_s += t - record.pending_since
            record.end_s = t
        return False

    def core_queue_of(self, job_id: int) -> str:
        trace_job = self.trace_jobs[job_id]
        return trace_job.queue or self.policy.queue_of(trace_job.team)

    def _requeue(self, job_id: int, t: float, *, preempted_by: int | None = None, backoff_until: float | None = None) -> None:
        """A preempted or evicted gang frees its GPUs and waits again; work since the last checkpoint is lost."""
        if job_id not in self.running:
            raise SimulationError(f"victim {job_id} is not running")
        record = self.records[job_id]
        if record.idle_hold_s and t >= record.run_started_s + record.run_overhead_s + record.remaining_s:
            self._finish(job_id, t)  # its work was done: only its idle hold ends early
            return
        job = self.running.pop(job_id)
        self._take(job, job.placement, +1)
        self.in_use[job.queue] -= job.gpus
        elapsed = t - record.run_started_s
        interval = self.scenario.checkpoint_interval_s
        saved = elapsed - elapsed % interval if interval else 0.0
        progress = min(record.remaining_s, max(0.0, saved - record.run_overhead_s))
        self._count_work(record, job.gpus, progress)
        record.remaining_s -= progress
        record.served_gpu_s += job.gpus * elapsed
        record.lost_gpu_s += job.gpus * (elapsed - progress)
        record.overhead_due_s = self.config.restart_overhead_s
        record.generation += 1
        record.pending_since = t
        if preempted_by is not None:
            record.preemptions += 1
            self.result.preemptions += 1
        requeued = replace(
            job,
            state=JobState.PENDING,
            placement=(),
            admitted_at=None,
            started_at=None,
            are_pods_ready=False,
            preempted_by=preempted_by if preempted_by is not None else job.preempted_by,
            evictions=job.evictions + (backoff_until is not None),
            backoff_until=backoff_until,
            attained_gpu_s=job.attained_gpu_s + job.gpus * elapsed,
        )
        self._enqueue(requeued)
        self._log(t, "preempt" if preempted_by is not None else "evict", job_id, preempted_by)

    def _count_work(self, record: JobRecord, gpus: int, work_s: float) -> None:
        """The run's kept work (`work_s` after its restart overhead) that falls before the horizon."""
        work_from = record.run_started_s + record.run_overhead_s
        record.work_gpu_s_in_span += gpus * max(0.0, min(work_from + work_s, self.result.horizon_s) - work_from)

    def _take(self, job: Job, placement, sign: int) -> None:
        """Move a gang's GPUs on or off its nodes; `sign` −1 allocates, +1 releases."""
        per_pod = {ps.name: ps.gpus_per_pod for ps in job.pod_sets}
        for pod in placement:
            i = self.node_index[pod.node]
            before = self.free[i]
            after = before + sign * per_pod[pod.pod_set]
            if after < 0 or after > self.whole[i]:
                raise SimulationError(f"node {pod.node} over-committed: {after} free after job {job.id}")
            self.free[i] = after
            if self.schedulable[i]:
                self.whole_free += (after == self.whole[i]) - (before == self.whole[i])
        self.allocated -= sign * job.gpus

    def _change_quota(self, change: QuotaChange) -> None:
        self.quotas.setdefault(change.team, {})[change.flavor] = change.gpus
        queues = self.policy.queues(self.quotas, self.scenario.queue_teams)
        for name in queues:
            self.pending.setdefault(name, {})
            self.in_order.setdefault(name, True)
            self.in_use.setdefault(name, 0)
            self.usage.setdefault(name, 0.0)
        self.queues = queues

    def _log(self, t: float, what: str, job_id: int, detail=None) -> None:
        if self.log_enabled:
            self.result.log.append((t, what, job_id, detail))


def pod_sets_for(job: TraceJob, node_width: int) -> tuple[PodSet, ...]:
    """One pod if the job fits a node; else whole-node pods plus one pod for the remainder."""
    if job.gpus_per_pod:
        return (PodSet("worker", job.gpus // job.gpus_per_pod, job.gpus_per_pod),)
    if node_width <= 0 or job.gpus <= node_width:
        return (PodSet("worker", 1, job.gpus),)
    whole, rest = divmod(job.gpus, node_width)
    sets = (PodSet("worker", whole, node_width),)
    return sets + ((PodSet("rest", 1, rest),) if rest else ())


def simulate(
    scenario: Scenario,
    policy: Policy,
    *,
    progress: Callable[[int, int], None] | None = None,
    log: bool = False,
    always_full: bool = False,
) -> SimResult:
    return Engine(scenario, policy, log=log, always_full=always_full).run(progress)
