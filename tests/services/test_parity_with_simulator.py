"""Parity: the live reconcile pass on the simulated cluster admits what the simulator admits.

The same fleet, queues and jobs (all submitted at time 0, in one order) go through `reconcile_pass_run` (database, snapshot translator,
simulated cluster) and through the simulator's engine, with each job's true duration taken from
the simulated cluster. Every admission — time, job and nodes — must be the same.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.test import override_settings

from scheduling.cluster.simulated import SimulatedCluster, simulated_duration_s
from scheduling.core.model import Node
from scheduling.fleetfile import FleetSpec, NodeSpec
from scheduling.models import Cohort, Flavor, Job, Placement, Queue, QueueQuota, Team
from scheduling.services import reconcile_pass_run, fleet_sync, job_submit
from scheduling.simulation.engine import Scenario, simulate
from scheduling.simulation.fleet import Fleet
from scheduling.simulation.policies import get_policy
from scheduling.simulation.trace import Trace, TraceJob
from tests.conftest import make_user

FLAVOR = "gpu"
QUOTAS = {"a": 16, "b": 8, "c": 8}
# (team, GPUs, runtime limit s): a mix of single GPUs, whole nodes and two-node gangs.
JOBS = [("abc"[i % 3], [1, 2, 4, 8, 1, 16, 8][i % 7], 60 + (i * 53) % 400) for i in range(40)]


def _policies():
    gangway = get_policy("gangway")
    # The live pass needs an admin to approve cross-team plans, and its usage history accrues per
    # pass; parity is about the shared core, so both are switched off on both sides.
    no_preemption = replace(gangway, fair_share_history=False, config=replace(gangway.config, preemption_enabled=False))
    return [get_policy("kueue-like"), no_preemption]


def _load_fleet_and_queues(policy, engine_queues):
    fleet_sync(
        fleet=FleetSpec(
            topology=("rack",),
            nodes=tuple(NodeSpec(name=f"n{i + 1}", flavor=FLAVOR, capacity_gpus=8, allocatable_gpus=8, labels={"rack": f"r{i // 2 + 1}"}) for i in range(4)),
        )
    )
    flavor = Flavor.objects.get(name=FLAVOR)
    for queue in engine_queues.values():
        team, _ = Team.objects.get_or_create(name=queue.team)
        cohort = Cohort.objects.get_or_create(name=queue.cohort)[0] if queue.cohort else None
        row = Queue.objects.create(
            name=queue.name, team=team, cohort=cohort, weight=queue.weight,
            strategy=queue.strategy.value, preemption_policy=queue.preemption.value,
        )
        for quota in queue.quotas.values():
            QueueQuota.objects.create(queue=row, flavor=flavor, nominal=quota.nominal,
                                      borrowing_limit=quota.borrowing_limit, lending_limit=quota.lending_limit)


@pytest.mark.django_db
@pytest.mark.parametrize("policy", _policies(), ids=lambda p: f"{p.name} policy")
def test_live_reconcile_and_simulator_admit_the_same_gangs(policy):
    sim_fleet = Fleet(("rack",), tuple(Node(f"n{i + 1}", FLAVOR, 8, 8, {"rack": f"r{i // 2 + 1}"}) for i in range(4)))
    scenario_quotas = {team: {FLAVOR: gpus} for team, gpus in QUOTAS.items()}
    engine_queues = policy.queues(scenario_quotas)
    with override_settings(GANGWAY_SCHEDULER={"topology_aware": policy.config.topology_aware,
                                              "preemption_enabled": policy.config.preemption_enabled,
                                              "uncheckpointed_borrowers_last": policy.config.uncheckpointed_borrowers_last}):
        _load_fleet_and_queues(policy, engine_queues)
        admin = make_user("parity-admin", is_admin=True)
        jobs = [
            job_submit(user=admin, queue_name=policy.queue_of(team), flavor_name=FLAVOR, name=f"j{i}",
                       pod_sets=[{"name": "worker", "count": max(1, gpus // 8), "gpus_per_pod": min(gpus, 8)}],
                       runtime_limit_s=limit, now=0.0)
            for i, (team, gpus, limit) in enumerate(JOBS)
        ]
        trace = Trace("parity", tuple(
            TraceJob(job.id, 0.0, simulated_duration_s(job_id=job.id, runtime_limit_s=limit), gpus, team, runtime_limit_s=limit)
            for i, (job, (team, gpus, limit)) in enumerate(zip(jobs, JOBS))
        ))
        result = simulate(Scenario(trace, sim_fleet, scenario_quotas), policy, log=True)
        expected = sorted((t, job, tuple(sorted(node for node, _ in pods))) for t, what, job, pods in result.log if what == "start")

        live = []
        cluster = SimulatedCluster()
        for t in sorted({0.0} | {entry[0] for entry in result.log}):
            admitted = reconcile_pass_run(now=t, cluster=cluster).admitted
            for job_id in admitted:
                nodes = tuple(sorted(Placement.objects.filter(job_id=job_id).values_list("node__name", flat=True)))
                live.append((t, job_id, nodes))
    assert live, "the scenario admits something"
    assert sorted(live) == expected
    assert Job.objects.filter(state="succeeded").count() == len(JOBS)
