"""The bench command runs each benchmark on a small size and prints the figures it promises."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command


def bench(*args):
    out = StringIO()
    call_command("bench", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_cycle_reports_its_times_and_rate_beside_the_first_fit_baseline():
    figures = bench("cycle", "--nodes", "32", "--pending", "300", "--queues", "3", "--repeats", "2")
    assert figures["p50_ms"] <= figures["p95_ms"] and figures["baseline_p50_ms"] <= figures["baseline_p95_ms"]
    assert figures["admissions"] > 0 and figures["baseline_admissions"] > 0
    # The rate is the filling cycle's admissions over that cycle's time, not a figure of its own.
    assert figures["admissions_per_s"] == pytest.approx(figures["admissions"] / (figures["fill_cycle_ms"] / 1000), rel=0.05, abs=1)
    assert 0 < figures["allocated_gpus"] <= 32 * 8


def test_quality_compares_with_the_exact_optimum():
    figures = bench("quality", "--instances", "2")
    assert figures["instances"] == 2
    assert 0 < figures["worst_ratio"] <= figures["mean_ratio"] <= 1.0


def test_fragmentation_compares_three_placers_on_one_stream():
    figures = bench("fragmentation", "--jobs", "120")
    assert set(figures) >= {"gangway", "first_fit", "random"}
    assert figures["gangway"]["mean_whole_free_nodes"] >= figures["random"]["mean_whole_free_nodes"]


def test_a_nonsense_size_is_a_clear_error():
    with pytest.raises(CommandError, match="--nodes must be at least 1"):
        call_command("bench", "cycle", "--nodes", "0")


def test_explain_and_estimate_report_every_pending_job_and_their_times():
    explain = bench("explain", "--nodes", "32", "--pending", "300", "--queues", "3", "--repeats", "3")
    assert explain["pending"] > 0 and explain["explained"] == explain["pending"] == sum(explain["blocking"].values())
    assert explain["best_ms"] <= explain["median_ms"] and explain["target_ms"] == 1000
    estimate = bench("estimate", "--nodes", "32", "--pending", "300", "--queues", "3")
    assert estimate["estimated_within_horizon"] + estimate["beyond_horizon"] == estimate["pending"] > 0
    assert estimate["cycles"] > 0 and estimate["target_s"] == 10
