"""Trace, fleet and quota loaders: the shipped Philly table, the generic CSV and its errors by line."""

from __future__ import annotations

import json

import pytest

from scheduling.simulation.engine import pod_sets_for
from scheduling.simulation.fleet import FleetError, load_fleet, load_quotas, philly_fleet
from scheduling.simulation.scenario import build_scenario
from scheduling.simulation.trace import TraceError, TraceJob, load_csv, parse_csv, philly_vc_nodes


def test_generic_csv_with_optional_columns():
    trace = parse_csv(
        "submit_time_s,duration_s,num_gpus,team,gpus_per_pod,priority,runtime_limit_s\n"
        "10,100,16,vision,8,5,3600\n"
        "0,5.5,1,,,,\n"
    )
    assert [(j.id, j.submit_s, j.team, j.gpus, j.gpus_per_pod, j.priority, j.runtime_limit_s) for j in trace.jobs] == [
        (1, 0.0, "default", 1, None, 0, None),
        (2, 10.0, "vision", 16, 8, 5, 3600),
    ]


def test_every_bad_row_is_reported_with_its_line_number():
    text = (
        "submit_time_s,duration_s,num_gpus\n"
        "0,100,1\n"
        "x,100,1\n"  # line 3
        "5,0,1\n"  # line 4: zero duration
        "5,10,0\n"  # line 5: zero GPUs
        "5,10\n"  # line 6: missing field
        "7,10,2\n"
    )
    with pytest.raises(TraceError) as caught:
        parse_csv(text, source="jobs.csv")
    assert [e.split(":")[0] for e in caught.value.errors] == ["line 3", "line 4", "line 5", "line 6"]
    assert "submit_time_s 'x' is not a number" in str(caught.value)
    assert str(caught.value).startswith("jobs.csv: 4 bad row(s)")


def test_a_missing_column_is_reported_on_line_1():
    with pytest.raises(TraceError, match="line 1: missing column.*num_gpus"):
        parse_csv("submit_time_s,duration_s\n0,1\n")


def test_gpus_not_a_multiple_of_gpus_per_pod_is_an_error(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("submit_time_s,duration_s,num_gpus,gpus_per_pod\n0,1,12,8\n")
    with pytest.raises(TraceError, match="line 2: num_gpus 12 is not a multiple of gpus_per_pod 8"):
        load_csv(path)


def test_the_default_philly_window_and_vcs_give_68503_jobs():
    scenario = build_scenario("philly")
    assert len(scenario.trace.jobs) == 68_503
    assert len(scenario.trace.teams) == 11
    assert (len(scenario.fleet.nodes), scenario.fleet.gpus) == (352, 2816)
    assert round(scenario.trace.gpu_seconds / 3600) == 690_860


def test_scale_shrinks_fleet_and_quotas_alike():
    fleet, quotas = philly_fleet(philly_vc_nodes(), scale=0.25)
    assert (len(fleet.nodes), fleet.gpus, sum(quotas.values())) == (88, 704, 704)
    assert {n.labels["rack"] for n in fleet.nodes} == {f"r{k:03d}" for k in range(1, 12)}  # racks of 8 nodes


def test_a_job_larger_than_a_node_becomes_whole_node_pods_plus_the_rest():
    assert [(p.count, p.gpus_per_pod) for p in pod_sets_for(TraceJob(1, 0, 1, 12), 8)] == [(1, 8), (1, 4)]
    assert [(p.count, p.gpus_per_pod) for p in pod_sets_for(TraceJob(1, 0, 1, 32), 8)] == [(4, 8)]
    assert [(p.count, p.gpus_per_pod) for p in pod_sets_for(TraceJob(1, 0, 1, 4), 8)] == [(1, 4)]
    assert [(p.count, p.gpus_per_pod) for p in pod_sets_for(TraceJob(1, 0, 1, 8, gpus_per_pod=2), 8)] == [(4, 2)]


def test_fleet_file_and_node_list(tmp_path):
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({
        "topology": ["block", "rack"],
        "nodes": [{"name": f"g{i}", "flavor": "H100", "gpus": 8, "labels": {"block": "b1", "rack": f"r{i % 2}"}} for i in range(4)],
    }))
    fleet = load_fleet(path, scale=0.5)
    assert fleet.topology == ("block", "rack") and [n.name for n in fleet.nodes] == ["g0", "g1"]
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\na,1,1,8,V100\nb,1,1,0,\nc,1,1,2,T4\n")
    assert [(n.name, n.flavor, n.allocatable_gpus) for n in load_fleet(nodes).nodes] == [("a", "V100", 8), ("c", "T4", 2)]


def test_an_invalid_fleet_file_names_the_node_and_field(tmp_path):
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"topology": [], "nodes": [{"name": "g1", "flavor": "H100", "gpus": -1}]}))
    with pytest.raises(FleetError, match="g1.*gpus"):
        load_fleet(path)


def test_quotas_csv(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text("team,gpus\nvision,64\nnlp,32\n")
    assert load_quotas(path, flavor="H100", scale=0.5) == {"vision": {"H100": 32}, "nlp": {"H100": 16}}
    path.write_text("team,gpus\nvision,lots\n")
    with pytest.raises(FleetError, match="line 2"):
        load_quotas(path, flavor="H100")


def test_a_csv_trace_without_quotas_shares_the_fleet_equally(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("submit_time_s,duration_s,num_gpus,team\n0,10,1,a\n0,10,1,b\n0,10,1,c\n")
    fleet = tmp_path / "f.json"
    fleet.write_text(json.dumps({"topology": [], "nodes": [{"name": f"g{i}", "flavor": "H100", "gpus": 8} for i in range(4)]}))
    scenario = build_scenario(str(trace), fleet=fleet)
    assert scenario.quotas == {"a": {"H100": 11}, "b": {"H100": 11}, "c": {"H100": 10}}
