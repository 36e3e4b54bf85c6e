"""Build the live benchmark's scale in the configured database: bulk rows (COPY on PostgreSQL), seeded."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from contextlib import contextmanager
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection, transaction

from scheduling.benchmarks import synthetic
from scheduling.core.model import JobState
from scheduling.models import (
    Cohort, FleetSettings, Flavor, GpuUsageSample, Job, JobEvent, Membership, Node, Placement, PlanStatus, PodSet,
    PreemptionPlan, PreemptionVictim, Queue, QueueQuota, QueueUsage, ReconcileState, Role, SimulatedWorkload, Team,
    QueueUsageRollup, TeamAllotment, UsageRollup,
)
from scheduling.services.common import to_datetime
from scheduling.services.usage import idle_jobs_record

FLAVOR = synthetic.FLAVOR
PASSWORD = "gangway"
RUNNING_SIZES = ((1, 55), (2, 30), (4, 10), (8, 5))  # (GPUs, weight): ~1.8 GPUs per running job
RUNNING_FILL = 0.95
FINISHED_PER_PENDING = 5
OPEN_PLANS = 20
SUPERSEDED_PLANS = 300
HISTORY_DAYS = 7
PREEMPTED_ONE_IN = 50


@dataclass
class Scale:
    nodes: int = 1250
    gpus_per_node: int = 8
    queues: int = 50
    pending: int = 100_000
    usage_minutes: int = 60
    seed: int = 1


@dataclass
class Built:
    admin: object
    researcher: object
    queue_names: list[str]
    pending_job_id: int
    deep_job_id: int
    jobs: int
    seconds: float


def database_wipe() -> None:
    """A fresh database: every table of the project emptied (migrations applied first)."""
    call_command("migrate", verbosity=0, interactive=False)
    call_command("flush", verbosity=0, interactive=False)


def scale_build(scale: Scale, *, now: float) -> Built:
    started = time.perf_counter()
    rng = random.Random(scale.seed)
    with _without_row_triggers(), transaction.atomic():
        admin, researchers, queues, flavor = _organisation(scale)
        nodes = _nodes(scale, flavor)
        next_id = 1
        running, next_id = _running_jobs(scale, rng, queues, researchers, flavor, nodes, now, next_id)
        pending_first = next_id
        next_id = _pending_jobs(scale, rng, queues, researchers, flavor, now, next_id)
        finished_first = next_id
        next_id = _finished_jobs(scale, rng, queues, researchers, flavor, now, next_id)
        _usage_samples(scale, rng, running, flavor.pk, now)
        _plans(rng, running, pending_first, finished_first, now)
        _sequences_reset()
    ReconcileState.objects.get_or_create(pk=1)
    idle_jobs_record(now=now)
    for model in (Job, PodSet, Placement, GpuUsageSample, UsageRollup, QueueUsageRollup, JobEvent):
        _analyze(model._meta.db_table)
    return Built(
        admin=admin, researcher=researchers[0][0], queue_names=[q.name for q in queues],
        pending_job_id=pending_first + scale.pending // 2, deep_job_id=finished_first + (next_id - finished_first) // 2,
        jobs=next_id - 1, seconds=round(time.perf_counter() - started, 1),
    )


def scale_found(scale: Scale) -> Built:
    """The scale an earlier run built in this database, measured again as it is now (--reuse)."""
    admin = get_user_model().objects.filter(username="admin", is_superuser=True).first()
    first_pending = Job.objects.filter(state=JobState.PENDING.value).order_by("pk").values_list("pk", flat=True).first()
    if admin is None or first_pending is None:
        raise LookupError("no scale built here: run bench live without --reuse first")
    researcher = get_user_model().objects.filter(username__endswith="-researcher").order_by("username").first()
    last = Job.objects.order_by("-pk").values_list("pk", flat=True).first()
    return Built(admin=admin, researcher=researcher, queue_names=list(Queue.objects.values_list("name", flat=True)),
                 pending_job_id=first_pending + scale.pending // 2, deep_job_id=last // 2, jobs=last, seconds=0.0)


def _organisation(scale: Scale):
    users = get_user_model()
    admin = users.objects.create_user("admin", password=PASSWORD, is_staff=True, is_superuser=True)
    flavor = Flavor.objects.create(name=FLAVOR)
    FleetSettings.objects.update_or_create(pk=1, defaults={"topology_levels": list(synthetic.TOPOLOGY)})
    cohort = Cohort.objects.create(name="shared")
    nominal = scale.nodes * scale.gpus_per_node // scale.queues
    hashed = make_password(PASSWORD)
    researchers, queues = [], []
    for i in range(scale.queues):
        team = Team.objects.create(name=f"team{i:02d}")
        TeamAllotment.objects.create(team=team, flavor=flavor, gpus=nominal)
        queue = Queue.objects.create(team=team, name=f"q{i:02d}", cohort=cohort)
        QueueQuota.objects.create(queue=queue, flavor=flavor, nominal=nominal)
        QueueUsage.objects.create(queue=queue, usage_gpu_s=0.0)
        user = users.objects.create(username=f"team{i:02d}-researcher", password=hashed)
        Membership.objects.create(user=user, team=team, role=Role.RESEARCHER)
        researchers.append((user, team))
        queues.append(queue)
    return admin, researchers, queues, flavor


def _nodes(scale: Scale, flavor) -> list[Node]:
    rows = [
        Node(name=n.name, flavor=flavor, capacity_gpus=n.capacity_gpus, allocatable_gpus=n.allocatable_gpus, labels=n.labels)
        for n in synthetic.fleet(scale.nodes, scale.gpus_per_node)
    ]
    return Node.objects.bulk_create(rows, batch_size=1000)


def _job_row(job_id, *, owner_id, queue_id, flavor_id, name, gpus, state, submitted_at, priority=0, topology_required="",
             runtime_limit_s=None, checkpoint_interval_s=None, admitted_at=None, started_at=None, finished_at=None,
             generation=0, applied=None, ready_pods=0):
    return (job_id, owner_id, queue_id, name, flavor_id, priority, topology_required, "", runtime_limit_s,
            checkpoint_interval_s, True, "[]", state, gpus, submitted_at, admitted_at, started_at, finished_at,
            generation, generation if applied is None else applied, ready_pods, 0, None, None, False, "", "", "Job", None)


JOB_COLUMNS = ("id", "owner_id", "queue_id", "name", "flavor_id", "priority", "topology_required", "topology_preferred",
               "runtime_limit_s", "checkpoint_interval_s", "is_preemptible", "tolerations", "state", "gpus",
               "submitted_at", "admitted_at", "started_at", "finished_at", "admission_generation",
               "applied_generation", "ready_pods", "evictions", "backoff_until", "preempted_by_id", "is_borrowing",
               "cluster_namespace", "cluster_name", "cluster_kind", "pod_template")
POD_SET_COLUMNS = ("id", "job_id", "name", "count", "gpus_per_pod")
EVENT_COLUMNS = ("job_id", "from_state", "to_state", "actor_id", "reason", "message", "created_at")


def _running_jobs(scale, rng, queues, researchers, flavor, nodes, now, next_id):
    """Single-pod jobs packed first-fit onto the nodes until ~95% of the GPUs are allocated."""
    sizes, weights = zip(*RUNNING_SIZES)
    target = int(scale.nodes * scale.gpus_per_node * RUNNING_FILL)
    jobs, pod_sets, placements, workloads, events, running = [], [], [], [], [], []
    allocated, node_index, free = 0, 0, scale.gpus_per_node
    while allocated < target and node_index < len(nodes):
        gpus = min(rng.choices(sizes, weights)[0], free)
        q = (next_id - 1) % len(queues)
        queue, (user, team) = queues[q], researchers[q]
        started = now - rng.uniform(60, 6 * 3600)
        limit = rng.choice((8 * 3600, 24 * 3600))
        moment = to_datetime(started)
        jobs.append(_job_row(next_id, owner_id=user.pk, queue_id=queue.pk, flavor_id=flavor.pk, name=f"run-{next_id}",
                             gpus=gpus, state=JobState.RUNNING.value, submitted_at=to_datetime(started - 30),
                             runtime_limit_s=limit, admitted_at=moment, started_at=moment, generation=1, ready_pods=1))
        pod_sets.append((next_id, next_id, "worker", 1, gpus))
        placements.append((next_id, next_id, 0, nodes[node_index].pk, gpus))
        # Still running well past the benchmark: a few finish in each simulated minute.
        workloads.append((next_id, 1, started, now - started + rng.uniform(600, 12 * 3600), 1, 1))
        events.append((next_id, "", "pending", user.pk, "submitted", "", to_datetime(started - 30)))
        events.append((next_id, "pending", "admitted", None, "admitted", "1 pods on 1 nodes", moment))
        running.append((next_id, gpus, nodes[node_index].name, team.pk, queue.pk))
        allocated += gpus
        free -= gpus
        if free == 0:
            node_index, free = node_index + 1, scale.gpus_per_node
        next_id += 1
    _copy(Job, JOB_COLUMNS, jobs)
    _copy(PodSet, POD_SET_COLUMNS, pod_sets)
    _copy(Placement, ("job_id", "pod_set_id", "pod_index", "node_id", "gpus"), placements)
    _copy(SimulatedWorkload, ("job_id", "generation", "released_at", "duration_s", "pods", "releases"), workloads)
    _copy(JobEvent, EVENT_COLUMNS, events)
    return running, next_id


def _pending_jobs(scale, rng, queues, researchers, flavor, now, next_id) -> int:
    by_name = {q.name: (q, researchers[i][0]) for i, q in enumerate(queues)}
    names = [q.name for q in queues]
    stream = synthetic.jobs(scale.pending, names, seed=scale.seed, first_id=next_id)
    start = now - scale.pending  # one submission a second, the newest just now
    jobs, pod_sets, events = [], [], []
    for k, job in enumerate(stream):
        queue, user = by_name[job.queue]
        pod_set = job.pod_sets[0]
        submitted = to_datetime(start + k)
        jobs.append(_job_row(job.id, owner_id=user.pk, queue_id=queue.pk, flavor_id=flavor.pk, name=f"train-{job.id}",
                             gpus=job.gpus, state=JobState.PENDING.value, submitted_at=submitted, priority=job.priority,
                             topology_required=job.topology.required or "", runtime_limit_s=job.runtime_limit_s,
                             checkpoint_interval_s=job.checkpoint_interval_s))
        pod_sets.append((job.id, job.id, pod_set.name, pod_set.count, pod_set.gpus_per_pod))
        events.append((job.id, "", "pending", user.pk, "submitted", "", submitted))
    _copy(Job, JOB_COLUMNS, jobs)
    _copy(PodSet, POD_SET_COLUMNS, pod_sets)
    _copy(JobEvent, EVENT_COLUMNS, events)
    return next_id + scale.pending


def _finished_jobs(scale, rng, queues, researchers, flavor, now, next_id) -> int:
    """The history: five finished jobs per pending one over the last 30 days; those admitted in the last week with
    their admission event (one in PREEMPTED_ONE_IN also preempted), the events the history page reads."""
    count = scale.pending * FINISHED_PER_PENDING
    states = (JobState.SUCCEEDED.value,) * 8 + (JobState.FAILED.value, JobState.CANCELLED.value)
    jobs, pod_sets, events = [], [], []
    for k in range(count):
        q = rng.randrange(len(queues))
        gpus = rng.choice((1, 1, 2, 4, 8))
        submitted = now - 30 * 86400 + rng.uniform(0, 30 * 86400 - scale.pending - 7200)
        job_id = next_id + k
        jobs.append(_job_row(job_id, owner_id=researchers[q][0].pk, queue_id=queues[q].pk, flavor_id=flavor.pk,
                             name=f"done-{job_id}", gpus=gpus, state=rng.choice(states),
                             submitted_at=to_datetime(submitted), runtime_limit_s=3600,
                             admitted_at=to_datetime(submitted + 60), started_at=to_datetime(submitted + 90),
                             finished_at=to_datetime(submitted + 90 + rng.uniform(60, 3600)), generation=1,
                             applied=0))  # suspended when it finished
        pod_sets.append((job_id, job_id, "worker", 1, gpus))
        if submitted + 60 >= now - HISTORY_DAYS * 86400:
            events.append((job_id, "pending", "admitted", None, "admitted", "1 pods on 1 nodes", to_datetime(submitted + 60)))
            if job_id % PREEMPTED_ONE_IN == 0:
                events.append((job_id, "running", "preempted", None, "preempted", "", to_datetime(submitted + 600)))
        if len(jobs) >= 50_000:
            _finished_copy(jobs, pod_sets, events)
            jobs, pod_sets, events = [], [], []
    _finished_copy(jobs, pod_sets, events)
    return next_id + count


def _finished_copy(jobs, pod_sets, events) -> None:
    _copy(Job, JOB_COLUMNS, jobs)
    _copy(PodSet, POD_SET_COLUMNS, pod_sets)
    _copy(JobEvent, EVENT_COLUMNS, events)


ROLLUP_COLUMNS = ("start", "bucket_s", "job_id", "team_id", "queue_id", "flavor_id", "allocated_gpu_s", "used_gpu_s")


def _usage_samples(scale, rng, running, flavor_id, now) -> None:
    """One sample per allocated GPU per minute over the last `usage_minutes`, as the collector writes them."""
    columns = ("at", "node_name", "gpu", "job_id", "team_id", "util_percent", "fb_used_mib")
    if connection.vendor == "postgresql":
        placement, job, node, queue = (m._meta.db_table for m in (Placement, Job, Node, Queue))
        with connection.cursor() as cursor:  # generated in the database: ~570,000 rows at full scale
            cursor.execute(
                f"INSERT INTO {GpuUsageSample._meta.db_table} ({', '.join(columns)}) "
                f"SELECT to_timestamp(%s) - make_interval(mins => m), n.name, g::text, j.id, q.team_id, random() * 100, 40000 "
                f"FROM {placement} p JOIN {job} j ON j.id = p.job_id JOIN {node} n ON n.id = p.node_id "
                f"JOIN {queue} q ON q.id = j.queue_id, generate_series(1, %s) m, generate_series(0, p.gpus - 1) g",
                [now, scale.usage_minutes],
            )
            # The collector's minute rollups of the same hour, one per job and minute (what the fleet page reads).
            cursor.execute(
                f"INSERT INTO {UsageRollup._meta.db_table} ({', '.join(ROLLUP_COLUMNS)}) "
                f"SELECT to_timestamp(%s) - make_interval(mins => m), 60, j.id, q.team_id, j.queue_id, j.flavor_id, "
                f"60.0 * j.gpus, 60.0 * j.gpus * random() FROM {job} j JOIN {queue} q ON q.id = j.queue_id, "
                f"generate_series(1, %s) m WHERE j.state = 'running'",
                [now, scale.usage_minutes],
            )
    else:
        rows, rollups = [], []
        for minute in range(scale.usage_minutes):
            at = to_datetime(now - 60 * (scale.usage_minutes - minute))
            for job_id, gpus, node_name, team_id, queue_id in running:
                rows.extend((at, node_name, str(gpu), job_id, team_id, rng.uniform(0, 100), 40_000.0) for gpu in range(gpus))
                rollups.append((at, 60, job_id, team_id, queue_id, flavor_id, 60.0 * gpus, rng.uniform(0, 60.0 * gpus)))
        _copy(GpuUsageSample, columns, rows)
        _copy(UsageRollup, ROLLUP_COLUMNS, rollups)
    columns = ", ".join(column for column in ROLLUP_COLUMNS if column != "job_id")
    with connection.cursor() as cursor:  # the queues' rollups, as the collector writes them beside the jobs'
        cursor.execute(
            f"INSERT INTO {QueueUsageRollup._meta.db_table} ({columns}) SELECT start, bucket_s, team_id, queue_id, flavor_id, "
            f"SUM(allocated_gpu_s), SUM(used_gpu_s) FROM {UsageRollup._meta.db_table} GROUP BY start, bucket_s, team_id, queue_id, flavor_id"
        )


def _plans(rng, running, pending_first, finished_first, now) -> None:
    """Superseded plans (the page's history) and open ones that wait for an admin, two victims each."""
    victims = [job_id for job_id, *_ in running]
    for k in range(SUPERSEDED_PLANS + OPEN_PLANS):
        is_open = k >= SUPERSEDED_PLANS
        plan = PreemptionPlan.objects.create(
            job_id=pending_first + k, domain="b00", reason="quota", cost_gpu_hours=round(rng.uniform(1, 50), 3),
            teams_affected=["team01", "team02"], needs_approval=is_open,
            status=PlanStatus.PROPOSED if is_open else PlanStatus.SUPERSEDED,
        )
        PreemptionVictim.objects.bulk_create(
            PreemptionVictim(plan=plan, job_id=v, gpus=1, cost_gpu_hours=1.0) for v in rng.sample(victims, 2)
        )


def _copy(model, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """COPY on PostgreSQL (rows formatted here, in one block), executemany elsewhere (the small sizes a CI run uses)."""
    if not rows:
        return
    table = model._meta.db_table
    # Columns the builder does not name (added by later migrations) get their model default.
    defaults = [(f.column, f.get_default()) for f in model._meta.concrete_fields
                if f.column not in columns and not f.primary_key and f.has_default()]
    if defaults:
        columns = (*columns, *(column for column, _ in defaults))
        tail = tuple(json.dumps(v) if isinstance(v, (dict, list)) else v for _, v in defaults)
        rows = [(*row, *tail) for row in rows]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            text = "".join("\t".join(map(_copy_text, row)) + "\n" for row in rows)
            with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                copy.write(text)
        else:
            marks = ", ".join(["%s"] * len(columns))
            cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)


def _copy_text(value) -> str:
    """COPY's text format for the values the builder writes (its strings hold no tabs, newlines or backslashes)."""
    if value is None:
        return "\\N"
    if value is True or value is False:
        return "t" if value else "f"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


@contextmanager
def _without_row_triggers():
    """PostgreSQL: skip the per-row foreign-key checks at commit (~1M rows the builder wrote consistently)."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = DEFAULT")


def _sequences_reset() -> None:
    statements = connection.ops.sequence_reset_sql(no_style(), [Job, PodSet, Placement, SimulatedWorkload, JobEvent, GpuUsageSample])
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def _analyze(table: str) -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")


