"""The bench command runs each benchmark on a small size and prints the figures it promises."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command


def bench(*args):
    out = StringIO()
    call_command("bench", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_cycle_reports_times_and_the_baseline():
    figures = bench("cycle", "--nodes", "32", "--pending", "300", "--queues", "3", "--repeats", "2")
    for key in ("p50_ms", "p95_ms", "admissions_per_s", "baseline_p50_ms", "baseline_admissions_per_s"):
        assert figures[key] >= 0, key
    assert figures["allocated_gpus"] <= 32 * 8


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


def test_explain_and_estimate_report_their_times_against_the_targets():
    explain = bench("explain", "--nodes", "32", "--pending", "300", "--queues", "3", "--repeats", "1")
    assert explain["explained"] == explain["pending"] and explain["best_ms"] >= 0 and explain["target_ms"] == 1000
    estimate = bench("estimate", "--nodes", "32", "--pending", "300", "--queues", "3")
    assert estimate["estimated_within_horizon"] + estimate["beyond_horizon"] == estimate["pending"]
    assert estimate["wall_s"] >= 0 and estimate["target_s"] == 10
