"""Writes ask for a reconcile pass after commit, once per transaction; the task is a thin wrapper."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import transaction

from scheduling.services import job_submit, queue_update
from scheduling.tasks import reconcile
from tests.conftest import H100


def test_writes_enqueue_one_pass_after_commit(org, settings, django_capture_on_commit_callbacks):
    settings.GANGWAY_RECONCILE_ON_WRITE = True
    with mock.patch.object(reconcile, "delay") as delay, mock.patch("scheduling.tasks._broker_redis", return_value=None):
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            with transaction.atomic():
                for i in range(3):
                    job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=f"j{i}",
                               pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}])
                queue_update(actor=org["vision-lead"], queue_name="vision-main", quotas={H100: {"nominal": 16}})
        assert len(callbacks) == 1
        delay.assert_called_once_with(after_write=True)


def test_nothing_is_enqueued_when_reconcile_on_write_is_off(org, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="j",
                   pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}])
    assert callbacks == []


def test_the_task_runs_a_pass_on_the_embedded_broker(org):
    job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="j",
               pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 8}])
    result = reconcile.apply().get()
    assert result["skipped"] is False and len(result["admitted"]) == 1


def test_a_pass_after_a_write_or_one_that_moved_jobs_recomputes_the_start_estimates_at_once(org):
    from scheduling.tasks import refresh_estimates

    with mock.patch.object(refresh_estimates, "delay") as estimate, mock.patch("scheduling.tasks._broker_redis", return_value=None):
        reconcile.apply().get()  # a beat pass that changed nothing
        estimate.assert_not_called()
        reconcile.apply(kwargs={"after_write": True}).get()
        assert estimate.call_count == 1
        job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="j",
                   pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 8}])
        assert reconcile.apply().get()["admitted"]  # the beat pass admitted it: the queue moved
        assert estimate.call_count == 2


def test_manage_py_reconcile_once_prints_what_it_admitted(org, capsys):
    from django.core.management import call_command

    job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="j",
                     pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 8}])
    call_command("reconcile", "--once")
    assert f"admitted 1 job(s): #{job.pk}" in capsys.readouterr().out


@pytest.mark.integration
def test_on_redis_writes_share_one_requested_pass_until_it_starts(transactional_db, org, settings):
    from scheduling.tasks import ESTIMATE_REQUEST_KEY, REQUEST_KEY, _broker_redis

    settings.GANGWAY_RECONCILE_ON_WRITE = True
    client = _broker_redis()
    client.delete(REQUEST_KEY)

    def write(name: str) -> None:  # each commits, and asks for a pass then
        job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=name,
                   pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}])

    client.delete(ESTIMATE_REQUEST_KEY)
    try:
        with mock.patch.object(reconcile, "delay") as delay:
            for i in range(3):
                write(f"burst-{i}")
            assert delay.call_count == 1, "the first write asked; the pass it asked for has not started yet"
            reconcile.apply(kwargs={"after_write": True}).get()  # the requested pass starts, and sees all three
            write("after-the-pass-started")
            assert delay.call_count == 2, "a write after the pass began asks for another"
            assert 0 < client.ttl(REQUEST_KEY) <= settings.GANGWAY_RECONCILE_INTERVAL_S, "a lost request lapses"
    finally:
        client.delete(REQUEST_KEY, ESTIMATE_REQUEST_KEY)


@pytest.mark.integration
def test_on_redis_the_estimates_are_recomputed_at_most_once_per_gap_under_a_stream_of_passes(settings):
    from scheduling.tasks import ESTIMATE_REQUEST_KEY, ESTIMATE_STARTED_KEY, _broker_redis, estimates_request, refresh_estimates

    settings.GANGWAY_ESTIMATE_MIN_GAP_S = 15
    client = _broker_redis()
    client.delete(ESTIMATE_REQUEST_KEY, ESTIMATE_STARTED_KEY)
    try:
        with mock.patch.object(refresh_estimates, "delay") as at_once, \
                mock.patch.object(refresh_estimates, "apply_async") as later:
            estimates_request()
            assert at_once.call_count == 1 and later.call_count == 0, "no refresh ran lately: at once"
            with mock.patch("scheduling.services.explanations.estimates_refresh", return_value={}):
                refresh_estimates.apply().get()  # the requested refresh starts
            estimates_request()
            estimates_request()
            assert at_once.call_count == 1 and later.call_count == 1, "one refresh queued for the end of the gap"
            countdown_s = later.call_args.kwargs["countdown"]
            assert 14 <= countdown_s <= 15
            assert client.ttl(ESTIMATE_REQUEST_KEY) > countdown_s, "the request outlives its countdown"
    finally:
        client.delete(ESTIMATE_REQUEST_KEY, ESTIMATE_STARTED_KEY)
