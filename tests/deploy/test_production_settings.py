"""Production settings refuse to be unsafe: DEBUG off unless set, no start without a SECRET_KEY, and
`manage.py check --deploy` clean with the settings the manifests give."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_KEY = "k" * 10 + "production-only-a-long-random-string-of-fifty-characters-or-more"


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**clean, "DJANGO_SETTINGS_MODULE": "portal.settings", **env})


def test_without_debug_and_without_a_secret_key_gangway_refuses_to_start_and_says_why():
    result = manage("check")

    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set and DEBUG is off" in result.stderr


def test_debug_is_off_unless_set():
    result = manage("shell", "-c", "from django.conf import settings; print(settings.DEBUG, settings.SECURE_SSL_REDIRECT)",
                    SECRET_KEY=PRODUCTION_KEY)

    assert result.stdout.splitlines()[-1].split() == ["False", "True"], result.stderr


def test_check_deploy_is_clean_with_the_kubernetes_manifests_settings():
    documents = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/config.yaml").read_text()))
    config = next(d for d in documents if d["kind"] == "ConfigMap")["data"]
    env = {k: v for k, v in config.items() if k in ("DEBUG", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "SECURE_PROXY_SSL_HEADER")}
    assert env["DEBUG"] == "0"

    result = manage("check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=PRODUCTION_KEY, **env)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, "None", id="no proxy header trusted by default"),
        pytest.param({"SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO=https"}, "('HTTP_X_FORWARDED_PROTO', 'https')",
                     id="the proxy header from the environment"),
    ],
)
def test_the_proxy_ssl_header_is_configurable(env, expected):
    result = manage("shell", "-c", "from django.conf import settings; print(getattr(settings, 'SECURE_PROXY_SSL_HEADER', None))",
                    SECRET_KEY=PRODUCTION_KEY, **env)

    assert result.stdout.splitlines()[-1] == expected, result.stderr
