"""Parity scaffold: the simulator makes the same admissions as a plain sequence of run_admission_cycle calls.

The driver below is the simplest possible user of the core — at every event time it builds a
snapshot of *all* running and pending jobs and applies what the core decides — written without
any of the engine's code. The Django-level parity test (live reconcile on the simulated cluster
against the simulator) will reuse `direct_admissions` as its reference.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import JobState, Snapshot
from scheduling.simulation.engine import Engine, simulate
from scheduling.simulation.policies import get_policy
from tests.simulation.helpers import scenario, trace


def direct_admissions(scen, policy) -> list[tuple[float, int, tuple[str, ...]]]:
    """(time, job id, nodes) for every admission, by calling the core at every arrival and end."""
    engine = Engine(scen, policy)  # only to build the same core jobs, nodes and queues
    jobs = {tj.id: engine.core_job(tj) for tj in scen.trace.jobs}
    durations = {tj.id: tj.duration_s for tj in scen.trace.jobs}
    arrivals = sorted((tj.submit_s, tj.id) for tj in scen.trace.jobs)
    pending, running, ends, admitted = {}, {}, {}, []
    while arrivals or ends:
        t = min([a[0] for a in arrivals[:1]] + list(ends.values()))
        for job_id in [j for j, end in ends.items() if end == t]:
            del running[job_id], ends[job_id]
        while arrivals and arrivals[0][0] == t:
            job_id = arrivals.pop(0)[1]
            if not engine._never_fits(jobs[job_id]):
                pending[job_id] = jobs[job_id]
        if not pending:
            continue
        result = run_admission_cycle(
            Snapshot(t, engine.topology, engine.nodes, engine.queues, tuple(running.values()), tuple(pending.values()),
                     config=policy.config)
        )
        for admission in result.admissions:
            assert not admission.preempted, "this scaffold covers policies without preemption"
            job = pending.pop(admission.job_id)
            running[job.id] = replace(job, state=JobState.RUNNING, placement=admission.placement, admitted_at=t,
                                      started_at=t, are_pods_ready=True)
            ends[job.id] = t + durations[job.id]
            admitted.append((t, job.id, tuple(p.node for p in admission.placement)))
    return admitted


@pytest.mark.parametrize("name", ["fifo-isolated", "kueue-like", "sjf-oracle"])
def test_the_simulator_admits_what_direct_core_calls_admit(name):
    jobs = trace(*[(t // 2, "abc"[t % 3], [1, 2, 4, 8, 1, 12, 16][t % 7], 20 + (t * 53) % 300) for t in range(120)])
    scen = scenario(jobs, {"a": 16, "b": 8, "c": 8}, nodes=4, rack_size=2)
    result = simulate(scen, get_policy(name), log=True)
    simulated = [(t, job, tuple(node for node, _ in pods)) for t, what, job, pods in result.log if what == "start"]
    assert simulated == direct_admissions(scen, get_policy(name))
