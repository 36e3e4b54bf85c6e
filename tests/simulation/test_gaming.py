"""The gaming scenario: the strategies rewrite only the gaming team's jobs, the engine plays placeholders, idle holds
and extra queues as the live system would see them, and the outcome measures what the issue asks."""

from __future__ import annotations

import argparse
import io
import math
from dataclasses import replace

import pytest

from scheduling.simulation import gaming
from scheduling.simulation.confidence import Estimate
from scheduling.simulation.engine import simulate
from scheduling.simulation.policies import POLICIES
from scheduling.simulation.trace import Trace, TraceJob
from tests.simulation.helpers import scenario, trace

GANGWAY = POLICIES["gangway"]


def small_trace() -> Trace:
    jobs = [TraceJob(1, 0.0, 600.0, 24, gaming.GAMER), TraceJob(2, 4000.0, 600.0, 8, gaming.GAMER),
            TraceJob(3, 4000.0, 600.0, 4, gaming.GAMER), TraceJob(4, 10.0, 600.0, 16, "team1")]
    return Trace("small", tuple(jobs))


def test_split_cuts_only_the_gamers_wide_jobs_into_node_sized_pieces_standing_for_the_job():
    played = gaming.gaming_scenario("split", trace=small_trace()).trace
    pieces = [(j.gpus, j.stands_for) for j in played.jobs if j.stands_for == 1]
    assert pieces == [(8, 1)] * 3
    assert [(j.id, j.gpus) for j in played.jobs if j.team == "team1"] == [(4, 16)], "other teams untouched"


def test_placeholders_come_an_hour_early_do_no_work_and_are_cancelled_when_the_job_arrives():
    played = gaming.gaming_scenario("placeholders", trace=small_trace()).trace
    (holder,) = [j for j in played.jobs if j.duration_s == 0]
    assert (holder.stands_for, holder.gpus, holder.submit_s, holder.cancel_at_s) == (2, 8, 400.0, 4000.0)


def test_extra_queues_split_the_gamers_quota_and_belong_to_its_team():
    built = gaming.gaming_scenario("queues", trace=small_trace())
    extra = {name: q[gaming.FLAVOR] for name, q in built.quotas.items() if name.startswith(gaming.GAMER)}
    assert sum(extra.values()) == 128 and len(extra) == gaming.EXTRA_QUEUES
    assert set(built.queue_teams.values()) == {gaming.GAMER}


def test_a_cancelled_placeholder_frees_its_gpus_and_a_pending_one_leaves_the_queue():
    jobs = trace((0, "a", 8, 0), (0, "a", 8, 0), (100, "b", 8, 50))
    jobs = replace(jobs, jobs=tuple(replace(j, idle_hold_s=1e6, cancel_at_s=100.0) if j.team == "a" else j for j in jobs.jobs))
    result = simulate(scenario(jobs, {"a": 8, "b": 8}, nodes=1), GANGWAY)
    first, second, real = (result.records[k] for k in (1, 2, 3))
    assert first.cancelled and first.end_s == 100.0 and first.waited_s == 0
    assert second.cancelled and second.first_start_s is None and second.waited_s == 100.0, "pending until cancelled"
    assert real.first_start_s == 100.0, "the freed GPUs go to the job that came"


def test_an_idle_hold_keeps_the_gpus_after_the_work_and_a_reclaim_ends_it_without_redoing_the_work():
    jobs = trace((0, "a", 8, 100), (500, "b", 8, 50))
    jobs = replace(jobs, jobs=tuple(replace(j, idle_hold_s=10_000.0) if j.team == "a" else j for j in jobs.jobs))
    config = replace(GANGWAY.config, idle_grace_s=300.0, restart_overhead_s=0.0)
    result = simulate(scenario(jobs, {"a": 0, "b": 8}, nodes=1), replace(GANGWAY, config=config))
    hoard, owner = result.records[1], result.records[2]
    assert hoard.work_end_s == 100.0 and hoard.end_s == 500.0, "reclaimed once idle past the grace period"
    assert owner.first_start_s == 500.0
    assert result.records[1].lost_gpu_s == 0.0


def test_the_outcome_counts_a_split_job_as_waiting_for_its_last_piece_and_ignores_placeholders():
    built = gaming.gaming_scenario("split", trace=small_trace())
    result = simulate(replace(built, fleet=gaming.gaming_fleet()), gaming.defended_policy())
    for record in result.records.values():
        record.waited_s = 10.0 * record.id
    outcome = gaming.outcome(built, result)
    piece_ids = [j.id for j in built.trace.jobs if j.stands_for == 1]
    assert outcome.gamer_mean_wait_s == pytest.approx((10.0 * max(piece_ids) + 20.0 + 30.0) / 3)
    assert outcome.others_mean_wait_s == 40.0


WITHIN = Estimate(1.0, 0.97, 1.03)


@pytest.mark.parametrize(
    ("gpu_hours", "gamer_wait", "others_wait", "expected"),
    [
        pytest.param(WITHIN, Estimate(1.2, 1.1, 1.3), WITHIN, "no", id="every interval within the bar passes"),
        pytest.param(Estimate(1.1, 1.06, 1.14), WITHIN, WITHIN, "YES", id="more GPU-hours past the bar is a gain"),
        pytest.param(WITHIN, Estimate(0.9, 0.85, 0.94), WITHIN, "YES", id="a shorter wait past the bar is a gain"),
        pytest.param(WITHIN, WITHIN, Estimate(1.1, 1.06, 1.15), "YES", id="the others waiting longer past the bar fails it"),
        pytest.param(WITHIN, WITHIN, Estimate(1.03, 0.99, 1.07), "unresolved", id="an interval across the bar is unresolved"),
        pytest.param(WITHIN, Estimate(1.0, -math.inf, math.inf), WITHIN, "unresolved", id="one seed resolves nothing"),
    ],
)
def test_the_verdict_needs_every_interval_on_one_side_of_the_bar(gpu_hours, gamer_wait, others_wait, expected):
    assert gaming.verdict(gamer_gpu_hours=gpu_hours, gamer_wait=gamer_wait, others_wait=others_wait) == expected


def test_a_row_pairs_each_seed_with_its_own_honest_run_and_averages_the_ratios():
    honest = {1: gaming.Outcome(100.0, 1000.0, 500.0, 0, 1.0), 2: gaming.Outcome(200.0, 3000.0, 100.0, 0, 1.0)}
    played = {1: replace(honest[1], gamer_mean_wait_s=1100.0), 2: replace(honest[2], gamer_mean_wait_s=3300.0)}
    row = gaming._row(played, honest)
    assert row["gamer_wait_x"] == {"mean": pytest.approx(1.1), "low": pytest.approx(1.1), "high": pytest.approx(1.1)}
    assert row["gamer_mean_wait_s"] == 2200.0 and row["per_seed"][2]["gamer_wait_x"] == pytest.approx(1.1)
    assert row["verdict"] == "no"
    table = gaming.gaming_table({"policies": {"defended": {"honest": gaming._row(honest, honest), "split": row}}})
    assert "1.100 (1.10–1.10)" in table and "defended  split" in table


def test_the_command_runs_the_seeds_asked_for_and_prints_the_table(monkeypatch):
    from scheduling.simulation import cli

    asked = {}

    def fake_run_gaming(**options):
        asked.update(options)
        honest = {seed: gaming.Outcome(100.0, 1000.0, 500.0, 3, 1.0) for seed in options["seeds"]}
        return {"seeds": list(options["seeds"]), "gamer": gaming.GAMER, "jobs": 10, "gpus": 1024,
                "policies": {"defended": {"honest": gaming._row(honest, honest)}}}

    monkeypatch.setattr(cli, "run_gaming", fake_run_gaming)
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    out = io.StringIO()
    cli.run(parser.parse_args(["--scenario", "gaming", "--seed", "4", "--seeds", "2", "--no-progress"]),
            stdout=out, stderr=io.StringIO())
    assert asked["seeds"] == (4, 5) and asked["with_undefended"] is False
    assert "seeds 4, 5" in out.getvalue() and "defended  honest" in out.getvalue()
