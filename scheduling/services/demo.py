"""The demo world: the built-in fleet, eight teams with users, queues in one cohort, and a mix of jobs."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from scheduling import clock
from scheduling.fleetfile import demo_fleet, fleet_load
from scheduling.models import Cohort, Flavor, Job, Membership, PriorityClass, Queue, QueueQuota, QueueUsage, Role, Team, TeamAllotment
from scheduling.services.fleet import fleet_sync
from scheduling.services.jobs import job_submit
from scheduling.services.priority_classes import priority_class_create

DEMO_PASSWORD = "gangway"
DEMO_TEAMS = ("vision", "language", "speech", "robotics", "recsys", "safety", "infra", "research")
COHORT = "shared"

# (team, name, pods, gpus_per_pod, priority class, runtime_limit_min, topology required, preferred)
# Submitted after the first pass, when the fleet is busy: it fits its team's nominal quota, but the
# other teams borrow that quota, so reclaiming it is a cross-team preemption plan for the admin to approve.
DEMO_BACKLOG = [("research", "frontier-pretrain-48x8", 48, 8, "urgent", 30, "block", "rack")]
# Research is the big-pretraining team: it holds most of the H100 allotment; the others lend and borrow.
ALLOTMENT_WEIGHTS = {"research": 9}
# The story of the first screens lasts: the other teams' big gangs (32+ GPUs, most of it borrowed quota) run
# for eight hours and hold 98 of the 128 H100 nodes, so no plan of research's own jobs frees a block for the
# backlog gang: the only way is a cross-team plan that waits for `admin` until someone decides. The small jobs
# come and go every few minutes.

# (name, value, description, teams (None: all), GPUs per team at the class (None: no cap), is the default)
DEMO_PRIORITY_CLASSES = [
    ("low", -10, "Sweeps and evaluations that may wait.", None, None, False),
    ("normal", 0, "Most work.", None, None, True),
    ("high", 10, "Deadline work; at most 64 GPUs per team at once.", None, 64, False),
    ("urgent", 50, "The flagship pretraining run.", ["research"], None, False),
]

DEMO_JOBS = [
    ("vision", "vit-h-pretrain", 8, 8, "high", 480, "block", "rack"),
    ("vision", "detector-sweep-a", 1, 4, "low", 6, None, None),
    ("vision", "segmenter-finetune", 2, 8, "high", 9, None, "rack"),
    ("language", "llm-13b-sft", 8, 8, "high", 480, "block", "rack"),
    ("language", "tokenizer-eval", 1, 1, "normal", 4, None, None),
    ("language", "rlhf-reward-model", 4, 8, "high", 480, None, "rack"),
    ("speech", "asr-conformer", 4, 8, "normal", 480, None, "rack"),
    ("speech", "tts-vocoder", 1, 2, "normal", 5, None, None),
    ("speech", "speech-lm-pretrain", 6, 8, "high", 480, "block", "rack"),
    ("robotics", "policy-distill", 2, 8, "normal", 8, None, None),
    ("robotics", "sim2real-sweep", 1, 4, "normal", 6, None, None),
    ("robotics", "world-model", 8, 8, "high", 480, "block", "rack"),
    ("recsys", "ranker-retrain", 4, 8, "normal", 480, None, "rack"),
    ("recsys", "embedding-refresh", 2, 4, "normal", 5, None, None),
    ("recsys", "two-tower-large", 8, 8, "high", 480, None, "rack"),
    ("safety", "red-team-evals", 1, 8, "high", 6, None, None),
    ("safety", "classifier-sweep", 1, 2, "low", 4, None, None),
    ("safety", "reward-hacking-study", 4, 8, "normal", 480, None, "rack"),
    ("infra", "nccl-burn-in", 2, 8, "normal", 3, None, "rack"),
    ("infra", "checkpoint-io-bench", 1, 1, "low", 3, None, None),
    ("research", "moe-ablation", 4, 8, "normal", 10, None, "rack"),
    ("research", "long-context-probe", 2, 8, "normal", 8, None, None),
    ("language", "llm-70b-continued", 16, 8, "normal", 480, "block", "rack"),
    ("vision", "video-diffusion", 16, 8, "normal", 480, "block", "rack"),
    ("speech", "a100-whisper-ft", 2, 8, "normal", 9, None, None),
    ("robotics", "a100-rl-rollouts", 1, 8, "normal", 6, None, None),
    ("safety", "a100-interp", 1, 4, "normal", 5, None, None),
    ("recsys", "ranker-retrain-2", 4, 8, "normal", 480, None, "rack"),
    ("infra", "fabric-soak", 8, 8, "normal", 480, None, "rack"),
    ("research", "scaling-law-sweep", 12, 8, "normal", 15, "block", None),
]


@dataclass
class DemoSeedResult:
    users: list[tuple[str, str]]
    jobs_created: int


def _user(username: str, *, is_admin: bool = False):
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username, defaults={"is_staff": is_admin, "is_superuser": is_admin})
    if created:
        user.set_password(DEMO_PASSWORD)
        user.save()
    return user


@transaction.atomic
def demo_seed(*, now: float | None = None) -> DemoSeedResult:
    """Idempotent: the fleet is synced, missing rows created, and jobs submitted only into an empty database."""
    now = clock.moment(now)
    fleet = fleet_load(settings.GANGWAY_FLEET) if settings.GANGWAY_FLEET else demo_fleet()
    fleet_sync(fleet=fleet)
    gpus_by_flavor: dict[str, int] = {}
    for node in fleet.nodes:
        gpus_by_flavor[node.flavor] = gpus_by_flavor.get(node.flavor, 0) + node.allocatable_gpus
    flavors = {f.name: f for f in Flavor.objects.all()}
    cohort, _ = Cohort.objects.get_or_create(name=COHORT)
    users = [("admin", DEMO_PASSWORD)]
    admin = _user("admin", is_admin=True)
    members = {}
    for position, team_name in enumerate(DEMO_TEAMS):
        team, _ = Team.objects.get_or_create(name=team_name)
        queue, _ = Queue.objects.get_or_create(name=f"{team_name}-main", defaults={"team": team, "cohort": cohort})
        QueueUsage.objects.get_or_create(queue=queue)
        for flavor_name, total in gpus_by_flavor.items():
            share = _share(total, team_name, position, flavor_name)
            TeamAllotment.objects.get_or_create(team=team, flavor=flavors[flavor_name], defaults={"gpus": share})
            QueueQuota.objects.get_or_create(queue=queue, flavor=flavors[flavor_name], defaults={"nominal": share})
        for role in (Role.LEAD, Role.RESEARCHER):
            username = f"{team_name}-{role.value}"
            user = _user(username)
            Membership.objects.get_or_create(user=user, team=team, defaults={"role": role})
            users.append((username, DEMO_PASSWORD))
            members.setdefault(team_name, []).append(user)
    for name, value, description, teams, cap, is_default in DEMO_PRIORITY_CLASSES:
        if not PriorityClass.objects.filter(name=name).exists():
            priority_class_create(actor=admin, name=name, value=value, description=description, teams=teams,
                                  max_gpus_per_team=cap, is_default=is_default)
    created = 0
    if not Job.objects.exists():
        created = _submit(DEMO_JOBS, members=members, now=now - 600)
    return DemoSeedResult(users=users, jobs_created=created)


@transaction.atomic
def demo_backlog_seed(*, now: float | None = None) -> int:
    """Submit the big block-sized gang once (after the first pass, so it meets a busy fleet)."""
    now = clock.moment(now)
    names = [job[1] for job in DEMO_BACKLOG]
    if Job.objects.filter(name__in=names).exists():
        return 0
    members = {}
    for team, *_ in DEMO_BACKLOG:
        members[team] = [get_user_model().objects.get(username=f"{team}-{role}") for role in ("lead", "researcher")]
    return _submit(DEMO_BACKLOG, members=members, now=now)


def _share(total: int, team_name: str, position: int, flavor_name: str) -> int:
    """Allotments that sum exactly to the fleet: weighted for H100, even for other flavors."""
    weights = {team: (ALLOTMENT_WEIGHTS.get(team, 1) if flavor_name == "H100-80GB" else 1) for team in DEMO_TEAMS}
    unit, remainder = divmod(total, sum(weights.values()))
    return unit * weights[team_name] + (remainder if position == 0 else 0)


def _submit(jobs, *, members, now: float) -> int:
    """Submit the demo jobs whose flavor the fleet has (a custom GANGWAY_FLEET may lack one)."""
    created = 0
    flavors = set(Flavor.objects.filter(nodes__isnull=False).values_list("name", flat=True))
    for offset, (team, name, pods, gpus, priority_class, limit_min, required, preferred) in enumerate(jobs):
        flavor = "A100-80GB" if name.startswith("a100-") else "H100-80GB"
        if flavor not in flavors:
            continue
        owner = members[team][offset % 2]
        try:
            job_submit(
                user=owner,
                queue_name=f"{team}-main",
                flavor_name=flavor,
                name=name,
                pod_sets=[{"name": "worker", "count": pods, "gpus_per_pod": gpus}],
                priority_class=priority_class,
                topology_required=required,
                topology_preferred=preferred,
                runtime_limit_s=limit_min * 60,
                checkpoint_interval_s=300,
                is_preemptible=True,
                now=now + offset * 10,
            )
        except ValidationError:
            continue  # a custom fleet without this job's shape or topology
        created += 1
    return created
