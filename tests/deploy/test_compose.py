"""compose.yaml: the production shape on one host is well formed (no Docker engine here, so: a schema-level check)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("postgres", "redis", "web", "worker", "beat", "watcher")
GANGWAY_SERVICES = ("web", "worker", "beat", "watcher")
KEYS = {"image", "command", "environment", "volumes", "depends_on", "healthcheck", "restart", "ports", "working_dir", "profiles"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def command_words(service: dict) -> list[str]:
    command = service["command"]
    words = command if isinstance(command, list) else shlex.split(command)
    # `sh -c "..."`: the script is one more shell line to split.
    if words[:2] == ["sh", "-c"]:
        return [word.rstrip(";") for word in shlex.split(words[2].replace("$$", "$"))]
    return words


def test_every_service_exists_with_an_image_a_command_and_only_known_keys(compose):
    services = compose["services"]
    assert set(SERVICES) <= set(services)
    for name in SERVICES:
        service = services[name]
        assert set(service) <= KEYS | {"<<"}, f"{name}: unknown keys {set(service) - KEYS}"
        assert service.get("image"), name
        if name != "postgres":
            assert service.get("command"), f"{name} has no command"


@pytest.mark.parametrize(
    ("service", "expected"),
    [
        ("web", ["gunicorn", "portal.wsgi:application"]),
        ("worker", ["celery", "-A", "portal", "worker"]),
        ("beat", ["celery", "-A", "portal", "beat"]),
        ("watcher", ["python", "manage.py", "watch_cluster"]),
    ],
)
def test_each_gangway_process_runs_its_command(compose, service, expected):
    words = command_words(compose["services"][service])
    assert any(words[i : i + len(expected)] == expected for i in range(len(words))), words


def test_gangway_services_share_the_database_the_broker_and_the_kubeconfig_mount(compose):
    for name in GANGWAY_SERVICES:
        service = compose["services"][name]
        env = service["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        for variable in ("GANGWAY_CLUSTER", "GANGWAY_FLAVOR_LABEL", "GANGWAY_TOPOLOGY_LABELS", "GANGWAY_NAMESPACES", "GANGWAY_PROMETHEUS_URL"):
            assert variable in env, f"{name}: {variable} is not passed through"
        mounts = {re.sub(r"^\$\{[^}]*\}", "HOST", volume).split(":")[1]: volume for volume in service["volumes"]}
        assert "/etc/gangway/kube" in mounts and mounts["/etc/gangway/kube"].endswith(":ro"), "the kubeconfig is mounted read-only"
        assert env["KUBECONFIG"].startswith("/etc/gangway/kube/")
        assert set(service["depends_on"]) == {"postgres", "redis"}
        assert all(condition == {"condition": "service_healthy"} for condition in service["depends_on"].values())


def test_named_volumes_are_declared_and_variables_have_defaults_or_say_what_is_missing(compose):
    text = (ROOT / "compose.yaml").read_text()
    used = {v.split(":")[0] for name in SERVICES for v in compose["services"][name].get("volumes", ()) if not v.startswith((".", "/", "$"))}
    assert used <= set(compose["volumes"])
    for match in re.finditer(r"(?<!\$)\$\{([A-Z_]+)([^}]*)\}", text):
        name, rest = match.groups()
        assert rest.startswith((":-", ":?")), f"${{{name}}} has no default and no error message"


def test_the_readme_documents_running_against_a_kubernetes_cluster():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Run against a Kubernetes cluster"):]
    for needle in ("GANGWAY_CLUSTER", "KUBECONFIG", "GANGWAY_FLAVOR_LABEL", "GANGWAY_TOPOLOGY_LABELS", "GANGWAY_NAMESPACES",
                   "GANGWAY_PROMETHEUS_URL", "gangway.dev/queue", "gangway.dev/admission", "gangway.dev/job-id",
                   "watch_cluster", "check_invariants", "deploy/kubernetes/"):
        assert needle in section, needle
