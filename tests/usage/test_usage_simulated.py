"""Simulated GPU use: deterministic per job, busy or idle, one sample per allocated GPU."""

from __future__ import annotations

from scheduling.usage import simulated_usage
from scheduling.usage.simulated import is_idle_job

ALLOCATIONS = [(job_id, f"gpu-{job_id % 4:03d}", 4) for job_id in range(1, 41)]


def test_one_sample_per_allocated_gpu_with_distinct_gpus_per_node():
    samples = simulated_usage(ALLOCATIONS, at=1000.0)

    assert len(samples) == 40 * 4
    assert len({(s.node, s.gpu) for s in samples}) == len(samples)
    assert {s.job_id for s in samples} == set(range(1, 41))


def test_the_same_inputs_give_the_same_samples():
    assert simulated_usage(ALLOCATIONS, at=1000.0) == simulated_usage(ALLOCATIONS, at=1000.0)
    assert simulated_usage(ALLOCATIONS, at=1000.0) != simulated_usage(ALLOCATIONS, at=1000.0 + 600)


def test_jobs_are_busy_or_idle_for_their_whole_life():
    for at in (0.0, 3600.0, 86400.0):
        for sample in simulated_usage(ALLOCATIONS, at=at):
            if is_idle_job(sample.job_id):
                assert 0 <= sample.util_percent <= 10 and sample.fb_used_mib < 3000
            else:
                assert 85 <= sample.util_percent <= 98 and sample.fb_used_mib > 50_000
    idle = sum(is_idle_job(job_id) for job_id, _, _ in ALLOCATIONS)
    assert 0 < idle < len(ALLOCATIONS), "a demo fleet needs both busy jobs and idle allocations"
