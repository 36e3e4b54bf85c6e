"""`--set FIELD=VALUE`: the gangway policy's SchedulerConfig changed for one run, the yardsticks never."""

from __future__ import annotations

import pytest

from scheduling.core.model import CheckpointWaits
from scheduling.simulation.cli import main
from scheduling.simulation.policies import POLICIES, with_overrides
from scheduling.simulation.suite import SuiteTrace, run_suite
from tests.simulation.test_suite_inputs import an_itp_log


@pytest.mark.parametrize(
    "override, field, expected",
    [
        pytest.param("single_pods_beside_long_runners=true", "single_pods_beside_long_runners", True, id="a switch on"),
        pytest.param("topology_aware=off", "topology_aware", False, id="a switch off"),
        pytest.param("payoff_margin=4", "payoff_margin", 4.0, id="a number"),
        pytest.param("max_preemption_plans_per_cycle=2", "max_preemption_plans_per_cycle", 2, id="a whole number"),
        pytest.param("starvation_after_s=3600", "starvation_after_s", 3600.0, id="a number where the default is none"),
        pytest.param("reclaim_at_cost_after_s=none", "reclaim_at_cost_after_s", None, id="none"),
        pytest.param("service_levels_gpu_h=2,32,256", "service_levels_gpu_h", (2.0, 32.0, 256.0), id="a tuple"),
        pytest.param("preempt_at_checkpoints=all", "preempt_at_checkpoints", CheckpointWaits.ALL, id="a choice"),
    ],
)
def test_an_override_is_read_as_the_field_is_typed(override, field, expected):
    assert getattr(with_overrides(POLICIES["gangway"], [override]).config, field) == expected


@pytest.mark.parametrize(
    "override, message",
    [
        pytest.param("no_such_field=1", "--set 'no_such_field=1': expected FIELD=VALUE with FIELD one of", id="unknown field"),
        pytest.param("payoff_margin", "--set 'payoff_margin': expected FIELD=VALUE", id="no value"),
        pytest.param("payoff_margin=lots", "--set payoff_margin=lots: expected a number", id="not a number"),
        pytest.param("max_preemption_plans_per_cycle=2.5", "expected a whole number", id="not a whole number"),
        pytest.param("topology_aware=maybe", "--set topology_aware=maybe: expected true or false", id="not a switch"),
        pytest.param("preempt_at_checkpoints=sometimes", "must be one of never, own_queue, all", id="not a choice"),
    ],
)
def test_a_bad_override_is_a_clear_error(override, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        with_overrides(POLICIES["gangway"], [override])


def test_the_suite_changes_gangway_only_and_says_so(tmp_path, capsys):
    an_itp_log(tmp_path, jobs=80)
    small = (SuiteTrace("small", "cluster07.csv.gz"),)
    plain = run_suite(tmp_path, policies=("kueue-like", "gangway"), traces=small, workers=1)
    changed = run_suite(tmp_path, policies=("kueue-like", "gangway"), traces=small, workers=1,
                        overrides=("topology_aware=false", "preemption_enabled=false"))
    assert changed["config_overrides"] == ["topology_aware=false", "preemption_enabled=false"]
    for before, after in zip(plain["rows"], changed["rows"]):
        assert before["policies"]["kueue-like"]["mean_wait_s"] == after["policies"]["kueue-like"]["mean_wait_s"]
        assert after["policies"]["gangway"]["preemptions"] == 0


def test_a_bad_override_stops_the_suite_before_it_runs(capsys):
    assert main(["--suite", "--set", "payoff_margin=lots", "--no-progress"]) == 2
    assert "--set payoff_margin=lots: expected a number" in capsys.readouterr().err
