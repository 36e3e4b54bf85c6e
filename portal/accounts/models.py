"""Named API tokens: hashed at rest (django-rest-knox keeps only a digest), expiring, with their last use."""

from __future__ import annotations

from django.db import models
from knox.models import AbstractAuthToken


class ApiToken(AbstractAuthToken):
    name = models.CharField(max_length=100)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.user} / {self.name}"
