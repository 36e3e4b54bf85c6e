"""Shared fixtures: a small fleet, two teams with users of every role, and authenticated API clients."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from scheduling.fleetfile import FleetSpec, NodeSpec
from scheduling.models import Cohort, Flavor, Membership, Queue, QueueQuota, QueueUsage, Role, Team, TeamAllotment
from scheduling.services import fleet_sync

H100 = "H100-80GB"
PASSWORD = "gangway"
IS_INTEGRATION = os.environ.get("GANGWAY_INTEGRATION") == "1"


def pytest_collection_modifyitems(config, items):
    """Tests marked `integration` need real PostgreSQL, Redis and Celery: they run only with GANGWAY_INTEGRATION=1."""
    skip = pytest.mark.skip(reason="integration test: set GANGWAY_INTEGRATION=1 (with PostgreSQL and Redis) to run it")
    for item in items:
        if "integration" in item.keywords and not IS_INTEGRATION:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """Throttle counters, bad-token counts and login lockouts live in the cache: none carry over between tests."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _no_reconcile_on_write(settings):
    """Tests run reconcile passes explicitly; no broker needed."""
    settings.GANGWAY_RECONCILE_ON_WRITE = False
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def small_fleet_spec(*, racks: int = 2, nodes_per_rack: int = 4, gpus: int = 8) -> FleetSpec:
    """One block b1 of `racks` racks × `nodes_per_rack` nodes × `gpus` H100s (64 GPUs by default)."""
    nodes = []
    for rack in range(1, racks + 1):
        for n in range(1, nodes_per_rack + 1):
            nodes.append(
                NodeSpec(
                    name=f"gpu-r{rack}-n{n}",
                    flavor=H100,
                    capacity_gpus=gpus,
                    allocatable_gpus=gpus,
                    labels={"block": "b1", "rack": f"b1-r{rack:02d}"},
                )
            )
    return FleetSpec(topology=("block", "rack"), nodes=tuple(nodes))


@pytest.fixture
def fleet(db):
    fleet_sync(fleet=small_fleet_spec())
    return Flavor.objects.get(name=H100)


def stored_explanation(job) -> dict:
    """What a pending job's page shows as why it waits ({} when it has none), read now."""
    from scheduling.models import Job
    from scheduling.selectors.explanations import job_explanation_get

    return job_explanation_get(job=Job.objects.get(pk=job.pk)) or {}


def make_user(username: str, *, team: Team | None = None, role: str = Role.RESEARCHER, is_admin: bool = False):
    user = get_user_model().objects.create_user(username=username, password=PASSWORD, is_staff=is_admin, is_superuser=is_admin)
    if team is not None:
        Membership.objects.create(user=user, team=team, role=role)
    return user


@pytest.fixture
def org(fleet):
    """Teams vision and language (32 H100 each), one queue each in cohort `shared`, users of every role."""
    cohort = Cohort.objects.create(name="shared")
    users = {"admin": make_user("admin", is_admin=True)}
    for name in ("vision", "language"):
        team = Team.objects.create(name=name)
        TeamAllotment.objects.create(team=team, flavor=fleet, gpus=32)
        queue = Queue.objects.create(name=f"{name}-main", team=team, cohort=cohort)
        QueueQuota.objects.create(queue=queue, flavor=fleet, nominal=32)
        QueueUsage.objects.create(queue=queue)
        users[f"{name}-lead"] = make_user(f"{name}-lead", team=team, role=Role.LEAD)
        users[f"{name}-researcher"] = make_user(f"{name}-researcher", team=team)
    users["outsider"] = make_user("outsider")
    return users


@pytest.fixture
def client_as(org):
    def make(username: str | None) -> APIClient:
        client = APIClient()
        if username is not None:
            client.force_authenticate(org[username])
        return client

    return make


def job_body(**overrides) -> dict:
    body = {
        "name": "llama-pretrain",
        "queue": "vision-main",
        "flavor": H100,
        "pod_sets": [{"name": "worker", "count": 2, "gpus_per_pod": 8}],
        "topology": {"required": "block", "preferred": "rack"},
        "runtime_limit_s": 3600,
        "checkpoint_interval_s": 600,
        "preemptible": True,
    }
    body.update(overrides)
    return body


@pytest.fixture
def every_plan_runs(settings):
    """For tests of preemption mechanics (who is chosen, who approves, what the pass writes): their victims
    started seconds ago without checkpoints, a loss the default value rule (core.payoff, tested in
    tests/core/test_payoff.py) rightly refuses to pay for. Those tests are about the plan, not its value."""
    settings.GANGWAY_SCHEDULER = {**(getattr(settings, "GANGWAY_SCHEDULER", {}) or {}), "preempt_only_when_it_pays": False}
