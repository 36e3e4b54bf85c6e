"""A gunicorn worker loads its URL patterns and templates at start and sets them aside from the garbage collector:
a full collection walked them all at random requests (60-120 ms at the live benchmark's scale)."""

from __future__ import annotations

from tests.deploy.test_production_settings import PRODUCTION_KEY, manage


def test_a_worker_has_its_templates_compiled_and_frozen_out_of_the_collectors_way_before_its_first_request():
    probe = ("import gc, portal.wsgi; from django.template import engines; "
             "loader = engines['django'].engine.template_loaders[0]; "
             "print(gc.get_freeze_count(), 'web/queue_list.html' in {key.split(':')[0] for key in loader.get_template_cache})")
    result = manage("shell", "-c", probe, SECRET_KEY=PRODUCTION_KEY)

    frozen, compiled = result.stdout.split()[-2:]
    assert int(frozen) > 10_000 and compiled == "True", result.stderr
