"""The gaming defences live: a hoarding job in the database is flagged idle, shown as such to admins, and chosen first
when its cohort needs GPUs back; the signals page names every team's signals with the rule that acts on each."""

from __future__ import annotations

import pytest

from scheduling.core.explain import iso
from scheduling.core.model import JobState
from scheduling.models import IdleJob, Job, PreemptionPlan
from scheduling.selectors import gaming_signals
from scheduling.services import reconcile_pass_run, job_cancel, priority_class_create, usage_collect
from scheduling.snapshots import snapshot_build
from scheduling.cluster.registry import get_cluster
from tests.services.test_reconcile import T0, state, submit
from tests.usage.test_usage_store import fixed_util


@pytest.fixture
def hoarder(org, settings):
    """vision runs 16 busy GPUs; language holds 16 GPUs idle (a hoard, admitted first, uncheckpointed) and 32 busy ones,
    16 of them borrowed from vision. The fleet (64 GPUs) is full; usage is collected for five minutes."""
    settings.GANGWAY_IDLE_GRACE_S = 240
    vision_busy = submit(org, count=2, name="vision-busy", limit_s=7200)
    hoard = submit(org, user="language-researcher", queue="language-main", count=2, name="hoard", limit_s=36000,
                   checkpoint_interval_s=None)
    reconcile_pass_run(now=T0 + 1)
    language_busy = submit(org, user="language-researcher", queue="language-main", count=4, name="language-busy",
                           limit_s=7200, at=T0 + 2)
    reconcile_pass_run(now=T0 + 3)
    reconcile_pass_run(now=T0 + 4)
    source = fixed_util({vision_busy.pk: 92.0, hoard.pk: 3.0, language_busy.pk: 88.0})
    for minute in range(1, 6):
        usage_collect(now=T0 + 60 * minute, source=source)
    jobs = {job.name: job for job in Job.objects.all()}
    assert {name: job.state for name, job in jobs.items()} == {n: JobState.RUNNING for n in ("vision-busy", "hoard", "language-busy")}
    return jobs


def test_a_hoarding_job_is_flagged_idle_and_the_snapshot_carries_the_flag(hoarder):
    assert list(IdleJob.objects.values_list("job__name", flat=True)) == ["hoard"]
    snapshot, _ = snapshot_build(now=T0 + 301, cluster=get_cluster())
    flagged = {job.id for job in snapshot.admitted if job.idle_since is not None}
    assert flagged == {hoarder["hoard"].pk}


def test_a_job_is_idle_since_its_first_idle_grace_period_not_since_its_admission(hoarder):
    """The usage collection at minute 5 first finds the hoard idle over the grace period (4 min) and a later one keeps
    that start: work before it is the job's, so a preemption's cost counts it."""
    first_found = T0 + 300 - 240
    assert IdleJob.objects.get().since.timestamp() == first_found
    usage_collect(now=T0 + 360, source=fixed_util({hoarder["vision-busy"].pk: 92.0, hoarder["hoard"].pk: 3.0,
                                                   hoarder["language-busy"].pk: 88.0}))
    snapshot, _ = snapshot_build(now=T0 + 361, cluster=get_cluster())
    assert {job.id: job.idle_since for job in snapshot.admitted if job.idle_since is not None} == {hoarder["hoard"].pk: first_found}


def test_the_hoard_is_chosen_first_when_its_owner_needs_gpus_back(org, hoarder, every_plan_runs):
    reclaimer = submit(org, count=2, name="vision-reclaim", at=T0 + 302)
    reconcile_pass_run(now=T0 + 303)
    plan = PreemptionPlan.objects.get(job=reclaimer)
    assert list(plan.victims.values_list("name", flat=True)) == ["hoard"], "the idle job, not the busy borrower"


def test_the_hoard_is_chosen_even_when_its_team_borrows_nothing_and_the_plan_is_not_weighed(org, hoarder):
    """Without the payoff rule switched off: an idle victim loses no work, so the plan is not weighed."""
    Job.objects.filter(name="language-busy").update(state=JobState.SUCCEEDED.value)
    Job.objects.get(name="language-busy").placements.all().delete()
    submit(org, count=4, name="vision-filler", at=T0 + 302)  # vision holds 48 of its 32: the cohort has nothing left to lend
    reconcile_pass_run(now=T0 + 303)
    vision_wide = submit(org, count=2, name="vision-wide", at=T0 + 304)
    reconcile_pass_run(now=T0 + 305)
    vision_wide.refresh_from_db()
    assert vision_wide.state == JobState.PENDING
    plan = PreemptionPlan.objects.get(job=vision_wide)
    assert list(plan.victims.values_list("name", flat=True)) == ["hoard"]


def test_admins_see_the_hoard_as_first_victim_on_the_team_page_and_in_the_signals_table(browser_as, hoarder):
    page = browser_as("admin").get("/teams/language/").content.decode()
    idle_section = page.split('id="idle"')[1].split("<h2")[0]
    assert f"#{hoarder['hoard'].pk} hoard" in idle_section and "first victim" in idle_section
    signals = page.split('id="gaming"')[1]
    assert 'data-team="language"' in signals and "16 GPUs" in signals.split('class="idle')[1][:80]
    assert "first victim of any blocked job of its cohort" in signals, "with the rule that acts on it"
    member = browser_as("language-lead").get("/teams/language/").content.decode()
    assert 'id="gaming"' not in member, "the signals are for admins"
    table = browser_as("admin").get("/gaming/").content.decode()
    assert 'data-team="language"' in table and 'data-team="vision"' in table
    assert browser_as("language-lead").get("/gaming/").status_code == 403


def test_signals_count_splitting_placeholders_priority_classes_and_borrowed_uncheckpointed_hours(org, browser_as):
    priority_class_create(actor=org["admin"], name="normal", value=0, is_default=True)
    priority_class_create(actor=org["admin"], name="high", value=10, max_gpus_per_team=16)
    placeholder = submit(org, user="language-researcher", queue="language-main", count=1, name="placeholder", at=T0,
                         limit_s=36000)
    squatter = submit(org, user="language-researcher", queue="language-main", count=5, name="squatter", at=T0 + 1,
                      checkpoint_interval_s=None, limit_s=36000)
    reconcile_pass_run(now=T0 + 2)  # before vision asks (after, vision's jobs would go first: lent GPUs go first to them)
    for k in range(3):  # one 24-GPU job split into three node-sized ones, seconds apart
        submit(org, count=1, name=f"piece-{k}", at=T0 + 3 + k, priority_class="high" if k == 0 else None)
    submit(org, count=1, name="later", at=T0 + 600)
    reconcile_pass_run(now=T0 + 700)
    reconcile_pass_run(now=T0 + 701)
    job_cancel(user=org["language-researcher"], job_id=placeholder.pk)
    reconcile_pass_run(now=T0 + 702)
    squatter.refresh_from_db()
    assert squatter.is_borrowing and squatter.state == JobState.RUNNING
    by_team = {s.team: s for s in gaming_signals(now=T0 + 702 + 3600)}
    vision, language = by_team["vision"], by_team["language"]
    assert (vision.split_jobs, vision.jobs_submitted, round(vision.splitting_ratio, 2)) == (3, 4, 0.75)
    assert vision.class_use == [("high", 8, 16)]
    cancelled_today = {s.team: s.placeholder_cancellations for s in gaming_signals()}  # cancellations are stamped now
    assert cancelled_today == {"language": 1, "vision": 0}
    assert language.borrowed_uncheckpointed_jobs == 1
    assert language.borrowed_uncheckpointed_gpu_hours == pytest.approx(40 * (3600 + 2) / 3600, rel=0.01)
    assert (language.queues, vision.queues) == (1, 1)
    squatter_page = browser_as("language-researcher").get(f"/jobs/{squatter.pk}/").content.decode()
    assert "borrowed-at-risk" in squatter_page, "its owner sees the risk on the job's page"


def test_a_job_waiting_for_the_hoard_reads_whose_idle_gpus_it_takes_and_the_admin_sees_the_victim_is_idle(
        org, hoarder, browser_as, client_as):
    """vision wants its 16 lent GPUs back: the plan takes the hoard, another team's, so it waits for an admin. The waiting
    job's page and the API say so, naming the idle job; the plan list marks the victim idle; the hoard's own page says
    which plan takes it."""
    hoard = hoarder["hoard"]
    reclaimer = submit(org, count=2, name="vision-reclaim", at=T0 + 302)
    reconcile_pass_run(now=T0 + 303)
    reclaimer.refresh_from_db()
    assert reclaimer.state == JobState.PENDING
    plan = PreemptionPlan.objects.get(job=reclaimer)
    assert list(plan.victims.values_list("name", flat=True)) == ["hoard"] and plan.needs_approval
    page = browser_as("vision-researcher").get(f"/jobs/{reclaimer.pk}/").content.decode()
    headline = page.split('class="blocking headline"')[1].split("</p>")[0]
    assert "Gangway would take 16 GPUs back from 1 idle job of team language (idle since" in headline
    assert "once an admin approves" in headline
    assert f'href="/jobs/{hoard.pk}/">#{hoard.pk}</a> language, 16 GPUs: <span class="tag warn idle-victim"' in page
    explanation = client_as("vision-researcher").get(f"/api/v1/jobs/{reclaimer.pk}/").json()["explanation"]
    preempt = next(fix for fix in explanation["fixes"] if fix["action"] == "preempt")
    assert [(v["job"], v["team"], v["rule"]) for v in preempt["victims"]] == [(hoard.pk, "language", "idle")]
    assert preempt["victims"][0]["idle_since"] == iso(T0 + 60)
    assert preempt["detail"].startswith("reclaim 1 idle job of team language")
    plans = browser_as("admin").get("/preemptions/?show=needs-approval").content.decode()
    victims_cell = plans.split(f'id="plan-{plan.pk}"')[1].split('data-label="Cost"')[0]
    assert f"#{hoard.pk}</a> (language, 16 GPUs) <span class=\"tag warn idle-victim\"" in victims_cell
    hoard_page = browser_as("language-researcher").get(f"/jobs/{hoard.pk}/").content.decode()
    idle_flag = hoard_page.split('id="idle-flag"')[1].split("</p>")[0]
    assert f"plan #{plan.pk}</a> for job <a href=\"/jobs/{reclaimer.pk}/\">#{reclaimer.pk}</a> takes it once an admin approves" in idle_flag
    listed = next(p for p in client_as("admin").get("/api/v1/preemptions/").json()["results"] if p["id"] == plan.pk)
    assert [(v["job"], v["idle_since"] is not None) for v in listed["victims"]] == [(hoard.pk, True)]


def test_a_job_that_would_borrow_without_checkpoints_gets_lent_gpus_after_one_that_checkpoints_and_says_why(
        org, client_as):
    """Each team runs 24 of its 32 GPUs; 16 are free. language's 16-GPU job without checkpoints came first, vision's
    checkpointing one later; each would borrow 8. The cohort lends to vision's: it can give them back cheaply."""
    submit(org, count=3, name="vision-busy", limit_s=7200)
    submit(org, user="language-researcher", queue="language-main", count=3, name="language-busy", limit_s=7200)
    reconcile_pass_run(now=T0 + 1)
    squatter = submit(org, user="language-researcher", queue="language-main", count=2, name="squatter", at=T0 + 2,
                      checkpoint_interval_s=None, limit_s=36000)
    checkpointing = submit(org, count=2, name="vision-borrows", at=T0 + 3, limit_s=7200)
    reconcile_pass_run(now=T0 + 4)
    assert (state(squatter), state(checkpointing)) == (JobState.PENDING, JobState.ADMITTED)
    summary = client_as("language-researcher").get(f"/api/v1/jobs/{squatter.pk}/").json()["explanation"]["summary"]
    assert "would borrow without checkpoints, so lent GPUs go first to jobs that checkpoint" in summary
