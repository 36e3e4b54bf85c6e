"""Teams, their members and roles, GPU flavors, and the GPUs each team is guaranteed."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    RESEARCHER = "researcher", "Researcher"
    LEAD = "lead", "Lead"


class Team(models.Model):
    name = models.SlugField(max_length=63, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TeamNamespace(models.Model):
    """A Kubernetes namespace a team owns: its workloads may only use the team's queues, and jobs the
    team submits through Gangway are created there. A namespace belongs to one team at most."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="namespaces")
    name = models.SlugField(max_length=63, unique=True, help_text="The Kubernetes namespace (a DNS label).")

    class Meta:
        ordering = ["team", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.team})"


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.RESEARCHER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="membership_unique_user_team")]

    def __str__(self) -> str:
        return f"{self.user} ({self.role} of {self.team})"


class Flavor(models.Model):
    """A GPU type, e.g. H100-80GB. Flavor names come from the fleet."""

    name = models.CharField(max_length=63, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TeamAllotment(models.Model):
    """GPUs of one flavor a team is guaranteed; set by admins. Its queues' nominal quotas fit inside."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="allotments")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="allotments")
    gpus = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "flavor"], name="allotment_unique_team_flavor"),
            models.CheckConstraint(condition=models.Q(gpus__gte=0), name="allotment_gpus_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.gpus} × {self.flavor}"
