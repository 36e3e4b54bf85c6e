"""The week's submissions and split pieces, counted from stored settled hours and the window's two live ends, equal one
straightforward scan of the window's jobs: at any moment, for every team or one, as hours are stored, and when a job
found in the cluster arrives late for its creation time."""

from __future__ import annotations

import random

import pytest

from scheduling.cluster.base import DiscoveredWorkload, WorkloadSpec
from scheduling.core.model import PodSet as CorePodSet
from scheduling.models import Flavor, Job, Queue, SubmissionHour, SubmissionTally, Team
from scheduling.selectors import gaming_signals
from scheduling.selectors.gaming import WINDOW_S
from scheduling.selectors.splitting import HOUR_S, SETTLED_AFTER_S, submission_tallies
from scheduling.services import cluster_workloads_sync
from scheduling.services.common import to_datetime
from tests.conftest import H100, make_user

END = 1_790_000_000.0
"""Past the last seeded submission; the hours before it are seeded for longer than the window."""


def reference(now: float) -> dict[str, tuple[int, int, int, int]]:
    """Per team name (jobs, GPUs, split pieces, their GPUs) as the signal defines them, from one scan of the window
    (the computation the page made before the stored hours)."""
    submitted = Job.objects.filter(submitted_at__gte=to_datetime(now - WINDOW_S))
    tallies = {name: [0, 0, 0, 0] for name in Team.objects.values_list("name", flat=True)}
    for name, gpus in submitted.values_list("queue__team__name", "gpus"):
        tallies[name][0] += 1
        tallies[name][1] += gpus
    last, previous, counted = {}, {}, set()
    rows = (submitted.filter(gpus=8).order_by("owner_id", "flavor_id", "queue__team_id", "submitted_at", "id")
            .values_list("id", "owner_id", "flavor_id", "queue__team__name", "submitted_at", "gpus"))
    for job_id, owner, flavor, team_name, submitted_at, gpus in rows:
        key = (owner, flavor, team_name)
        at = submitted_at.timestamp()
        if key in last and at - last[key] <= 60.0:
            for piece in (previous[key], job_id):
                if piece not in counted:
                    counted.add(piece)
                    tallies[team_name][2] += 1
                    tallies[team_name][3] += gpus
        last[key], previous[key] = at, job_id
    return {name: tuple(tally) for name, tally in tallies.items()}


def shown(now: float, team: str | None = None) -> dict[str, tuple[int, int, int, int]]:
    return {s.team: (s.jobs_submitted, s.gpus_submitted, s.split_jobs, s.split_gpus) for s in gaming_signals(now=now, team=team)}


@pytest.fixture
def submissions(org):
    """Nine days of bursts before END: two teams, vision with two queues (one person's pieces in both pair), two flavors,
    three people per team, node-sized jobs and others, gaps around BURST_S (equal times, exactly 60 s, a microsecond
    more); a burst across every hour boundary and others within the hours."""
    rng = random.Random(7)
    vision = Team.objects.get(name="vision")
    Queue.objects.create(name="vision-second", team=vision, cohort=Queue.objects.get(name="vision-main").cohort)
    second_flavor = Flavor.objects.create(name="A100-40GB")
    queues = {team: list(Queue.objects.filter(team__name=team)) for team in ("vision", "language")}
    people = {team: [org[f"{team}-researcher"], org[f"{team}-lead"], make_user(f"{team}-third", team=Team.objects.get(name=team))]
              for team in queues}
    flavors = [Flavor.objects.get(name=H100), second_flavor]
    jobs = []

    def burst(at: float, sizes: tuple[int, ...]) -> None:
        team = rng.choice(list(queues))
        owner, flavor = rng.choice(people[team]), rng.choice(flavors)
        for _ in range(rng.choice((1, 2, 3, 5)) if len(sizes) > 1 else 2):
            jobs.append(Job(owner=owner, queue=rng.choice(queues[team]), flavor=flavor, name="j", gpus=rng.choice(sizes),
                            submitted_at=to_datetime(at)))
            at += rng.choice((0, 1, 30, 59.5, 60, 60, 61, 300)) + rng.choice((0, 0, 0.25, 0.000001))

    for hour in range(int(END - 9 * 86400) // HOUR_S * HOUR_S, int(END) - HOUR_S, HOUR_S):
        burst(hour + rng.choice((-61, -60, -59.5, -30, -0.5, 0)), sizes=(8,))  # two node-sized jobs, often a pair across it
        for _ in range(rng.randrange(3)):
            burst(hour + rng.uniform(0, HOUR_S), sizes=(8, 8, 8, 8, 1, 16))
    Job.objects.bulk_create(jobs)
    return len(jobs)


def test_every_moment_shows_the_figures_of_one_scan_of_the_window(submissions):
    """Moments less than an hour apart store the hours one by one; then the window starts just before hour boundaries,
    where a piece's neighbour may fall before it; then earlier moments again, with later hours stored."""
    assert submissions > 1000
    boundary = (END - 2 * 86400) // HOUR_S * HOUR_S
    moments = [END - 2 * 86400 + k * 997.3 for k in range(60)]
    moments += [boundary + k * HOUR_S + WINDOW_S - before for k in range(-24, 0) for before in (0.5, 30, 59.5, 60, 61)]
    for now in moments + moments[::-7]:  # and back: hours stored after a moment do not count at it
        assert shown(now) == reference(now), now
    assert SubmissionHour.objects.count() > 24 * 5, "settled hours are stored"
    assert SubmissionTally.objects.filter(split_jobs__gt=0).exists()


def test_one_team_shows_its_figures_of_the_scan(submissions):
    for now in (END - 86400 + 123.0, END + 4000.0, END + 2 * 86400):
        assert shown(now, team="vision") == {"vision": reference(now)["vision"]}


def test_the_figures_are_the_same_from_stored_hours_as_from_the_jobs(submissions):
    now = END + 0.5
    from_jobs = submission_tallies(since=now - WINDOW_S, now=now)
    assert SubmissionHour.objects.exists()
    assert submission_tallies(since=now - WINDOW_S, now=now) == from_jobs
    SubmissionTally.objects.update(jobs=0)
    assert submission_tallies(since=now - WINDOW_S, now=now) != from_jobs, "the second read used the stored hours"


def test_a_job_found_in_the_cluster_created_in_a_stored_hour_is_counted(submissions, fleet):
    now = END + 600.0
    before = shown(now)
    created = END - 3 * 86400 + 17.0
    stored = SubmissionHour.objects.filter(start__lte=to_datetime(created), start__gt=to_datetime(created - HOUR_S))
    assert stored.exists(), "its hour was counted without it"
    cluster_workloads_sync(now=now, workloads=[DiscoveredWorkload(
        namespace="default", name="found", created_at=created,
        spec=WorkloadSpec(queue="vision-main", flavor=H100, pod_sets=(CorePodSet("w", 1, 8),)))])
    assert Job.objects.filter(cluster_name="found").get().submitted_at == to_datetime(created)
    after = shown(now)
    assert after == reference(now)
    assert after["vision"][:2] == (before["vision"][0] + 1, before["vision"][1] + 8)


def test_an_hour_is_stored_only_once_its_jobs_and_their_neighbours_are_all_written(org):
    hour = (END // HOUR_S - 10) * HOUR_S
    shown(hour + HOUR_S + SETTLED_AFTER_S + 60 - 1)
    assert not SubmissionHour.objects.filter(start=to_datetime(hour)).exists()
    shown(hour + HOUR_S + SETTLED_AFTER_S + 60)
    assert SubmissionHour.objects.filter(start=to_datetime(hour)).exists()


