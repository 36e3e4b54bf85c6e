"""The suite's inputs: ITP-shaped logs, fleets sized by load, the seeded synthetic trace, the traces directory."""

from __future__ import annotations

import pytest

from scheduling.simulation.fleet import fleet_for_load, nodes_for_load
from scheduling.simulation.suite import (
    ROBUSTNESS_TRACES,
    TRACES,
    SuiteError,
    SuiteTrace,
    _scenario,
    check_traces_dir,
    ratio,
    run_suite,
    suite_table,
)
from scheduling.simulation.synthetic import multi_node_share, synthetic_trace
from scheduling.simulation.trace import Trace, TraceError, TraceJob, jittered, parse_itp, team_of

ITP = "job_id,submission_time,duration,num_gpu\n"


def test_an_itp_log_gets_teams_hashed_from_its_job_ids_and_starts_at_zero():
    trace = parse_itp(ITP + "a,100,10,1\nb,160,20,8\nc,130,5,2\n", teams=4)
    assert [(j.submit_s, j.gpus) for j in trace.jobs] == [(0.0, 1), (30.0, 2), (60.0, 8)]
    assert [j.team for j in trace.jobs] == [team_of("a", 4), team_of("c", 4), team_of("b", 4)]


def test_the_same_id_hashes_to_the_same_team_on_every_run():
    assert team_of("a11b4fc9-8f06-7093-2b93-bcb89acf0e7e", 4) == team_of("a11b4fc9-8f06-7093-2b93-bcb89acf0e7e", 4)
    assert {team_of(str(k), 4) for k in range(100)} == {"team0", "team1", "team2", "team3"}


def test_every_bad_itp_row_is_reported_with_its_line_number():
    with pytest.raises(TraceError) as caught:
        parse_itp(ITP + "a,0,10,1\nb,x,10,1\nc,5,0,1\n,5,10,1\nd,5,10\n")
    assert [e.split(":")[0] for e in caught.value.errors] == ["line 3", "line 4", "line 5", "line 6"]
    assert "submission_time 'x' is not a number" in str(caught.value)


def test_an_itp_log_without_its_columns_is_refused_on_line_1():
    with pytest.raises(TraceError, match="line 1: missing column.*num_gpu"):
        parse_itp("job_id,submission_time,duration\na,0,1\n")


@pytest.mark.parametrize(
    "gpu_s, span_s, largest, load, nodes",
    [
        pytest.param(100 * 8 * 3600, 3600, 8, 1.0, 100, id="demand of 100 nodes at full load is 100 nodes"),
        pytest.param(85 * 8 * 3600, 3600, 8, 0.85, 100, id="at 85 % load the fleet is demand / 0.85"),
        pytest.param(9 * 8 * 3600, 3600, 8, 1.0, 12, id="the count is rounded up to a multiple of 4"),
        pytest.param(8 * 3600, 3600, 64, 0.85, 8, id="the fleet holds at least the largest job"),
    ],
)
def test_fleet_sizing_by_load(gpu_s, span_s, largest, load, nodes):
    assert nodes_for_load(gpu_s, span_s, largest, load) == nodes


def test_a_sized_fleet_has_8_gpu_nodes_in_2_blocks_of_8_racks():
    fleet = fleet_for_load(40)
    assert fleet.topology == ("block", "rack") and fleet.gpus == 320
    assert len({n.labels["block"] for n in fleet.nodes}) == 2
    assert len({n.labels["rack"] for n in fleet.nodes}) == 16


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_synthetic_trace_is_seeded_and_holds_10_to_30_percent_of_gpu_hours_in_multi_node_gangs(seed):
    trace = synthetic_trace(seed=seed)
    assert trace == synthetic_trace(seed=seed)
    assert 0.10 <= multi_node_share(trace) <= 0.30
    durations = sorted(j.duration_s for j in trace.jobs)
    assert durations[len(durations) // 2] * 20 < durations[int(0.99 * len(durations))]  # heavy tail


def test_a_missing_traces_directory_is_a_clear_error(tmp_path):
    with pytest.raises(SuiteError, match="missing from .*cluster02.csv.gz.*--traces-dir"):
        check_traces_dir(tmp_path)


def an_itp_log(directory, name="cluster07.csv.gz", jobs=400):
    """A small gzipped ITP log: `jobs` one-to-eight-GPU jobs a minute apart, ids that hash over many teams."""
    import gzip

    rows = "".join(f"job-{k},{60 * k},{600 + 37 * k},{1 + k % 8}\n" for k in range(jobs))
    with gzip.open(directory / name, "wt") as out:
        out.write(ITP + rows)


@pytest.mark.parametrize(
    "trace, expected",
    [
        pytest.param(SuiteTrace("6 teams", "cluster07.csv.gz", teams=6), {"teams": 6, "nodes": 92},
                     id="an ITP trace hashed into 6 teams"),
        pytest.param(SuiteTrace("load 0.95", "cluster07.csv.gz", load=0.95), {"teams": 4, "nodes": 80},
                     id="an ITP trace on a fleet sized for 95 % load is smaller"),
        pytest.param(SuiteTrace("seed 3", "synthetic", seed=3), {"jobs": len(synthetic_trace(seed=3).jobs)},
                     id="the synthetic trace of another seed"),
    ],
)
def test_a_suite_trace_is_built_with_its_teams_load_and_seed(tmp_path, trace, expected):
    an_itp_log(tmp_path)
    scenario = _scenario(trace, str(tmp_path), None)
    built = {"teams": len(scenario.trace.teams), "nodes": len(scenario.fleet.nodes), "jobs": len(scenario.trace.jobs)}
    assert {key: built[key] for key in expected} == expected


def test_the_robustness_set_asks_for_the_suites_itp_traces_only():
    assert {t.source for t in ROBUSTNESS_TRACES if t.source.endswith(".gz")} <= {t.source for t in TRACES}
    assert len(set(ROBUSTNESS_TRACES)) == len(ROBUSTNESS_TRACES) == 11


def test_a_jittered_trace_submits_every_job_up_to_the_jitter_later_and_keeps_the_work():
    trace = synthetic_trace(jobs=500, seed=2)
    copy = jittered(trace, seed=1, within_s=60)
    by_work = lambda t: sorted((j.duration_s, j.gpus, j.team) for j in t.jobs)  # noqa: E731
    assert by_work(copy) == by_work(trace)
    assert [j.id for j in copy.jobs] == list(range(1, len(trace.jobs) + 1))
    assert [j.submit_s for j in copy.jobs] == sorted(j.submit_s for j in copy.jobs)
    originals = {(j.duration_s, j.gpus, j.team): j.submit_s for j in trace.jobs}
    moved = [j.submit_s - originals[(j.duration_s, j.gpus, j.team)] for j in copy.jobs
             if sum(1 for k in trace.jobs if (k.duration_s, k.gpus, k.team) == (j.duration_s, j.gpus, j.team)) == 1]
    assert moved and all(0 <= delay <= 60 and delay == int(delay) for delay in moved)
    assert any(delay > 0 for delay in moved)


def test_jitter_is_seeded():
    trace = synthetic_trace(jobs=200, seed=2)
    assert jittered(trace, seed=1, within_s=60) == jittered(trace, seed=1, within_s=60)
    assert jittered(trace, seed=1, within_s=60).jobs != jittered(trace, seed=2, within_s=60).jobs


def test_a_jittered_job_keeps_its_cancel_time_and_the_job_it_stands_for():
    trace = Trace("t", (TraceJob(1, 0.0, 100, 1, "a"),
                        TraceJob(2, 1.0, 100, 1, "a", cancel_at_s=50.0, stands_for=1)))
    for seed in range(1, 20):
        copy = jittered(trace, seed=seed, within_s=60)
        piece = next(j for j in copy.jobs if j.stands_for is not None)
        whole = next(j for j in copy.jobs if j.stands_for is None)
        assert piece.stands_for == whole.id
        assert piece.cancel_at_s - piece.submit_s == 49.0


def test_the_suite_with_replicas_reads_each_ratio_with_its_spread_over_jittered_copies(tmp_path):
    an_itp_log(tmp_path, jobs=300)
    small = (SuiteTrace("small", "cluster07.csv.gz"),)
    document = run_suite(tmp_path, policies=("kueue-like", "fifo-isolated", "gangway"), traces=small, workers=1,
                         replicas=2)
    assert [len(row["replicas"]) for row in document["rows"]] == [2, 2]
    for row in document["rows"]:
        assert row["replicas"][0]["mean_wait_ratio"]["gangway"] == ratio(row, "gangway")
        assert row["replicas"][0]["p99_wait_ratio"] == ratio(row, "gangway", "p99_wait_s")
    assert len(document["geomean_by_replica"]["gangway"]) == 2
    table = suite_table(document, ("kueue-like", "fifo-isolated", "gangway"))
    assert "×kueue, 2 runs" in table and "worst ×iso, 2 runs" in table


def test_the_suite_without_replicas_has_no_spread_columns(tmp_path):
    an_itp_log(tmp_path, jobs=100)
    document = run_suite(tmp_path, policies=("kueue-like", "gangway"), traces=(SuiteTrace("small", "cluster07.csv.gz"),),
                         workers=1)
    assert "replicas" not in document and all("replicas" not in row for row in document["rows"])
    assert "runs" not in suite_table(document, ("kueue-like", "fifo-isolated", "gangway"))


def test_the_suite_refuses_fewer_than_one_replica(tmp_path):
    with pytest.raises(SuiteError, match="--replicas must be at least 1, got 0"):
        run_suite(tmp_path, replicas=0)


def test_the_suite_always_runs_gangway_and_the_yardsticks_its_table_reads(tmp_path):
    an_itp_log(tmp_path, jobs=60)
    document = run_suite(tmp_path, policies=("kueue-like",), traces=(SuiteTrace("small", "cluster07.csv.gz"),), workers=1)
    assert set(document["policies"]) == {"kueue-like", "fifo-isolated", "gangway"}
    assert "geometric mean" in suite_table(document, tuple(document["policies"]))


def test_a_ratios_interval_is_cut_at_zero():
    from scheduling.simulation.suite import _interval

    assert _interval([0.01, 0.0, 0.03]) == "0.01 (0.00–0.05)"
    assert _interval([1.0, 1.0, 1.0]) == "1.00 (1.00–1.00)"
