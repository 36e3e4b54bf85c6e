"""The command line: table on stdout, JSON with the issue's keys, a self-contained Plotly report."""

from __future__ import annotations

import io
import json

from scheduling.simulation.cli import main, run


def write_inputs(tmp_path):
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "submit_time_s,duration_s,num_gpus,team\n"
        + "".join(f"{t},{50 + 7 * t},{g},{team}\n" for t, g, team in [(0, 8, "a"), (1, 4, "b"), (2, 16, "a"), (3, 1, "b"), (4, 2, "a"), (5, 8, "b")])
    )
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "topology: [rack]\nnodes:\n"
        + "".join(f"  - {{name: g{i}, flavor: H100, gpus: 8, labels: {{rack: r{i // 2}}}}}\n" for i in range(4))
    )
    return trace, fleet


def test_simulate_writes_the_table_the_json_and_the_plot(tmp_path):
    trace, fleet = write_inputs(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    document = run(
        {"trace": str(trace), "fleet": str(fleet), "policy": "fifo-isolated,kueue-like,gangway,sjf-oracle",
         "json_out": str(tmp_path / "r.json"), "plot_out": str(tmp_path / "r.html"), "scale": 1.0},
        stdout=out, stderr=err,
    )
    saved = json.loads((tmp_path / "r.json").read_text())
    assert list(saved["policies"]) == ["fifo-isolated", "kueue-like", "gangway", "sjf-oracle"]
    for summary in saved["policies"].values():
        assert {"mean_wait_s", "p50_wait_s", "p95_wait_s", "p99_wait_s", "wall_s", "jobs", "per_team", "per_size"} <= set(summary)
        assert summary["jobs"] == 6
        assert set(summary["per_team"]) == {"a", "b"}
        assert {"mean_wait_s", "p99_wait_s"} <= set(summary["per_team"]["a"])
        assert set(summary["per_size"]) == {"1", "2-8", "9-64"}
    assert document["policies"]["gangway"]["jobs"] == 6
    assert "gangway" in out.getvalue() and "mean wait" in out.getvalue()
    assert "events" in err.getvalue()  # the progress bar
    html = (tmp_path / "r.html").read_text()
    assert "Plotly.newPlot" in html and "<script src=" not in html  # plotly.js inlined, no CDN
    assert len(html) > 1_000_000


def test_a_bad_trace_exits_with_the_line_number(tmp_path, capsys):
    trace, fleet = write_inputs(tmp_path)
    trace.write_text("submit_time_s,duration_s,num_gpus\n0,1,1\n0,-1,1\n")
    assert main(["--trace", str(trace), "--fleet", str(fleet), "--no-progress"]) == 2
    assert "line 3: duration_s must be > 0" in capsys.readouterr().err


def test_fewer_than_one_replica_is_a_clear_error(capsys):
    assert main(["--suite", "--replicas", "0", "--no-progress"]) == 2
    assert "--replicas must be at least 1, got 0" in capsys.readouterr().err
