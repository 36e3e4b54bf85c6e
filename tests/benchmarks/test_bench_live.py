"""`bench live` builds a small scale, measures the pass, every page and submit against a live server, and
writes the figures it promises (their keys; timings are not asserted)."""

import json

import pytest
from django.core.management import CommandError, call_command

from scheduling.models import Job

SMALL = ["--pending", "60", "--nodes", "16", "--queues", "4", "--usage-minutes", "2", "--rounds", "1",
         "--clients", "1", "--submit-s", "0.4", "--busy-passes", "1", "--idle-passes", "1"]


@pytest.mark.django_db(transaction=True)
def test_bench_live_writes_the_pass_pages_baseline_and_submit_figures(live_server, tmp_path, capsys):
    out = tmp_path / "live.json"
    call_command("bench", "live", *SMALL, "--url", live_server.url, "--json", str(out))
    figures = json.loads(out.read_text())
    assert figures["pending"] == 60
    assert set(figures["pass"]) >= {"median_s", "floor_s", "core_s", "idle_s"}
    assert {"web_jobs", "web_fleet", "web_preemptions", "api_jobs", "api_nodes"} <= set(figures["pages"])
    for name, page in figures["pages"].items():
        assert set(page) >= {"p95_ms", "bytes", "queries"}, name
        assert page["bytes"] > 0, name
    assert set(figures["baseline"]) >= {"p95_ms", "rps"}
    assert set(figures["submit"]) >= {"rps", "p95_ms"} and figures["submit"]["errors"] == 0
    assert Job.objects.filter(state="pending").count() >= 60
    assert "bare SELECTs" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_bench_live_refuses_a_database_that_holds_jobs_unless_told_to_wipe_it(org, fleet):
    from scheduling.services import job_submit
    from tests.conftest import H100

    job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="mine",
               pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}])
    with pytest.raises(CommandError, match="--wipe"):
        call_command("bench", "live", *SMALL, "--url", "http://127.0.0.1:9")
    assert Job.objects.filter(name="mine").exists()


@pytest.mark.parametrize("bench", ["live", "submit-load"])
def test_the_live_benchmarks_ask_for_migrate_on_a_fresh_database_instead_of_a_traceback(db, monkeypatch, bench):
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("scheduling", "0001_initial")])
    with pytest.raises(CommandError, match="is not migrated: run `manage.py migrate`"):
        call_command("bench", bench, "--wipe")
