"""The Django project: settings, URLs, the REST API and the server-rendered pages."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
