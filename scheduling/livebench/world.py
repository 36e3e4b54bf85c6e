"""The demo world the live runs (fuzz_api, bench submit-load) work in, and API tokens for its users."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from portal.accounts.services import api_token_create
from scheduling.models import Membership, Role, Team
from scheduling.services import reconcile_pass_run
from scheduling.services.demo import demo_backlog_seed, demo_seed


def demo_world_seed() -> None:
    """The demo (fleet, teams, queues, priority classes, admitted jobs, a backlog whose cross-team preemption plan
    waits for approval) in this process's database, as `manage.py seed_demo` makes it."""
    demo_seed()
    reconcile_pass_run()
    demo_backlog_seed()
    reconcile_pass_run()


def api_tokens(usernames) -> dict[str, str]:
    """A one-day API token for each user, by username."""
    users = get_user_model().objects.in_bulk(list(usernames), field_name="username")
    return {name: api_token_create(user=users[name], name="livebench", expires_in_days=1)[1] for name in usernames}


def researchers_create(count: int) -> dict[str, str]:
    """`count` more researchers, spread over the demo teams in turn: username → their team's queue."""
    teams = list(Team.objects.order_by("name"))
    queues = {}
    for i in range(count):
        team = teams[i % len(teams)]
        user = get_user_model().objects.create_user(username=f"load-{i:02d}-{team.name}")
        Membership.objects.create(user=user, team=team, role=Role.RESEARCHER)
        queues[user.username] = f"{team.name}-main"
    return queues
