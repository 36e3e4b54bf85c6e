"""Invariants of the admission cycle over random fleets, quotas and job streams."""

from collections import Counter, defaultdict
from dataclasses import replace
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.core import preemption
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import (
    Job,
    JobState,
    Node,
    PodSet,
    Queue,
    Quota,
    SchedulerConfig,
    Snapshot,
    TopologyRequest,
)
from scheduling.core.quota import QuotaLedger, cohort_of

FLAVORS = ("H100", "A100")
TOPOLOGY = ("block", "rack")


@st.composite
def fleets(draw):
    nodes = []
    for i in range(draw(st.integers(1, 14))):
        capacity = draw(st.sampled_from([4, 8]))
        nodes.append(
            Node(
                name=f"n{i:02d}",
                flavor=draw(st.sampled_from(FLAVORS)),
                capacity_gpus=capacity,
                allocatable_gpus=draw(st.integers(0, capacity)),
                labels={"block": f"b{i % 2}", "rack": f"b{i % 2}r{i % 3}"},
                is_ready=draw(st.booleans().map(lambda b: b or draw(st.booleans()))),
                is_cordoned=draw(st.integers(0, 5)) == 0,
                external_gpus=draw(st.integers(0, 2)),
            )
        )
    return tuple(nodes)


@st.composite
def queue_sets(draw):
    queues = {}
    for i in range(draw(st.integers(1, 4))):
        quotas = {
            flavor: Quota(
                nominal=draw(st.integers(0, 32)),
                borrowing_limit=draw(st.none() | st.integers(0, 16)),
                lending_limit=draw(st.none() | st.integers(0, 16)),
            )
            for flavor in FLAVORS
        }
        name = f"q{i}"
        queues[name] = Queue(name, f"team{i % 2}", draw(st.sampled_from(["c1", "c1", None])), quotas=quotas)
    return queues


@st.composite
def job_streams(draw, queues, first_id):
    jobs = []
    for k in range(draw(st.integers(0, 14))):
        pod_sets = tuple(
            PodSet(f"ps{p}", draw(st.integers(1, 4)), draw(st.sampled_from([1, 2, 4, 8])))
            for p in range(draw(st.integers(1, 2)))
        )
        jobs.append(
            Job(
                id=first_id + k,
                queue=draw(st.sampled_from(sorted(queues))),
                team="",
                flavor=draw(st.sampled_from(FLAVORS)),
                pod_sets=pod_sets,
                priority=draw(st.integers(0, 3)),
                submitted_at=float(draw(st.integers(0, 50))),
                topology=TopologyRequest(draw(st.sampled_from([None, "rack", "block"])), None),
                checkpoint_interval_s=draw(st.sampled_from([None, 600])),
                is_preemptible=draw(st.booleans()),
                attained_gpu_s=draw(st.sampled_from([0.0, 0.0, 1e3, 1e4])),  # some ran before; some are promoted
            )
        )
    return [replace(j, team=queues[j.queue].team) for j in jobs]


def _apply(snapshot, result):
    """Jobs holding GPUs after the cycle's decisions are carried out."""
    holding = {job.id: job for job in snapshot.admitted}
    for eviction in result.evictions:
        holding.pop(eviction.job_id)
    pending = {job.id: job for job in snapshot.pending}
    for admission in result.admissions:
        for victim in admission.preempted:
            holding.pop(victim)
        job = pending[admission.job_id]
        holding[job.id] = replace(
            job, state=JobState.RUNNING, placement=admission.placement, admitted_at=snapshot.now,
            started_at=snapshot.now, are_pods_ready=True,
        )
    return holding


def check_invariants(snapshot, result):
    holding = _apply(snapshot, result)
    nodes = {n.name: n for n in snapshot.nodes}
    pending = {job.id: job for job in snapshot.pending}
    admitted_before = {job.id: job for job in snapshot.admitted}

    # No node over-committed: admitted GPUs + external <= allocatable.
    used = Counter()
    for job in holding.values():
        per_pod = {ps.name: ps.gpus_per_pod for ps in job.pod_sets}
        for pod in job.placement:
            used[pod.node] += per_pod[pod.pod_set]
    for name, gpus in used.items():
        node = nodes[name]
        assert gpus + node.external_gpus <= node.allocatable_gpus, f"{name} over-committed"

    for admission in result.admissions:
        job = pending[admission.job_id]
        # All or nothing: exactly one placement per pod, indices unique within each pod set.
        assert len(admission.placement) == job.pods
        assert Counter(p.pod_set for p in admission.placement) == Counter({ps.name: ps.count for ps in job.pod_sets})
        assert len({(p.pod_set, p.index) for p in admission.placement}) == job.pods
        for pod in admission.placement:
            node = nodes[pod.node]
            assert node.flavor == job.flavor and node.is_ready and not node.is_cordoned
        if job.topology.required:
            assert len({nodes[p.node].labels[job.topology.required] for p in admission.placement}) == 1
        for victim in admission.preempted:
            assert admitted_before[victim].is_preemptible, "preempted a non-preemptible job"

    # No queue above nominal + allowed borrowing; cohort pools (lending limits) not overdrawn.
    ledger = QuotaLedger(snapshot.queues, holding.values())
    for queue in snapshot.queues.values():
        for flavor, quota in queue.quotas.items():
            use = ledger.usage(queue.name, flavor)
            ceiling = quota.nominal if queue.cohort is None else quota.nominal + (quota.borrowing_limit if quota.borrowing_limit is not None else 10**9)
            assert use <= ceiling, f"{queue.name} above its ceiling"
            assert ledger.pool_free(cohort_of(queue), flavor) >= 0, "lending limits overdrawn"


def two_passes(data):
    """A first pass over a random job stream, and a second over what it admitted with new and higher-priority
    arrivals (the one that plans preemptions)."""
    nodes = data.draw(fleets())
    queues = data.draw(queue_sets())
    config = SchedulerConfig(restart_overhead_s=0, approval_threshold_gpu_hours=data.draw(st.sampled_from([0.0, 1e9])),
                             single_pods_beside_long_runners=data.draw(st.booleans()),
                             drain_for_underserved_gangs=data.draw(st.booleans()),
                             promote_after_waiting=data.draw(st.sampled_from([None, 0.5, 4.0])))
    usage = {name: data.draw(st.sampled_from([0.0, 1e3, 1e6])) for name in queues}  # some teams under-served
    first = Snapshot(
        now=1000.0, topology=TOPOLOGY, nodes=nodes, queues=queues, admitted=(),
        pending=tuple(data.draw(job_streams(queues, 1))), config=config, historical_usage=usage,
    )
    first_result = run_admission_cycle(first)
    second = replace(
        first,
        now=5000.0,
        admitted=tuple(_apply(first, first_result).values()),
        pending=tuple(data.draw(job_streams(queues, 100))),
    )
    return (first, first_result), second


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cycles_never_overcommit_and_admit_gangs_whole(data):
    (first, first_result), second = two_passes(data)
    check_invariants(first, first_result)
    second_result = run_admission_cycle(second)
    check_invariants(second, second_result)
    assert run_admission_cycle(second) == second_result, "same snapshot, same decisions"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_domain_that_cannot_beat_the_best_plan_is_cut_short_without_changing_any_decision(data):
    _, second = two_passes(data)
    finish_every_domain = preemption._victims_for_domain

    def in_full(*args, to_beat=None):
        return finish_every_domain(*args)

    with patch.object(preemption, "_victims_for_domain", in_full):
        in_full_result = run_admission_cycle(second)
    assert run_admission_cycle(second) == in_full_result


def test_a_gang_that_requires_one_rack_and_reclaims_only_quota_still_lands_in_one_rack():
    # Found by the property above: quota alone blocks the gang, so its plan's domain is the fleet; the gang must
    # still be placed inside one rack, as it requires, not spread over the fleet's free GPUs.
    nodes = (
        Node(name="n00", flavor="H100", capacity_gpus=4, allocatable_gpus=2, labels={"block": "b0", "rack": "b0r0"}),
        Node(name="n01", flavor="H100", capacity_gpus=4, allocatable_gpus=4, labels={"block": "b1", "rack": "b1r1"}),
    )
    queues = {
        "q0": Queue(name="q0", team="team0", cohort="c1", quotas={"H100": Quota(nominal=5)}),
        "q1": Queue(name="q1", team="team1", cohort="c1", quotas={"H100": Quota(nominal=0)}),
    }
    config = SchedulerConfig(restart_overhead_s=0, approval_threshold_gpu_hours=1e9)
    running = (
        Job(id=1, queue="q1", team="team1", flavor="H100", pod_sets=(PodSet("ps0", 1, 1),), priority=0, submitted_at=0.0),
        Job(id=2, queue="q0", team="team0", flavor="H100", pod_sets=(PodSet("ps0", 1, 1),), priority=0, submitted_at=0.0,
            is_preemptible=False),
    )
    first = Snapshot(now=1000.0, topology=TOPOLOGY, nodes=nodes, queues=queues, admitted=(), pending=running, config=config)
    gang = Job(id=100, queue="q1", team="team1", flavor="H100", pod_sets=(PodSet("ps0", 4, 1),), priority=1, submitted_at=0.0,
               topology=TopologyRequest(required="rack"))
    second = replace(first, now=5000.0, admitted=tuple(_apply(first, run_admission_cycle(first)).values()), pending=(gang,))
    result = run_admission_cycle(second)
    check_invariants(second, result)
    [admission] = result.admissions
    assert {p.node for p in admission.placement} == {"n01"} and admission.preempted
