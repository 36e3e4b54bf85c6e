"""The fleet summary pages read is the one the last pass recorded when nodes or placements changed, equal to one
computed now; with no pass lately, it is computed now."""

from __future__ import annotations

import datetime as dt

import pytest

from scheduling.models import Node, ReconcileState
from scheduling.selectors.fleet import fleet_summary, fleet_summary_compute
from scheduling.services import reconcile_pass_run, job_submit, node_cordon
from tests.conftest import H100

pytestmark = pytest.mark.django_db


def test_a_pass_that_places_or_sees_a_node_change_records_what_a_page_would_compute(org):
    job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="j",
               pod_sets=[{"name": "w", "count": 3, "gpus_per_pod": 4}])
    reconcile_pass_run()
    assert ReconcileState.objects.get().fleet_summary == fleet_summary_compute().as_dict()
    assert fleet_summary().totals.allocated_gpus == 12
    node_cordon(actor=org["admin"], node_name=Node.objects.order_by("name").first().name, is_cordoned=True)
    reconcile_pass_run()
    assert fleet_summary().totals.unavailable_nodes == 1


def test_without_a_recent_pass_the_summary_is_computed_now(org):
    reconcile_pass_run()
    ReconcileState.objects.update(last_pass_at=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    Node.objects.filter(pk=Node.objects.order_by("name").first().pk).update(is_unschedulable=True)
    assert fleet_summary().totals.unavailable_nodes == 1
