"""Queues at a glance: in use within nominal, borrowed, lent out and free per queue and flavor; pending GPUs; who
borrows from whom; the reader's own team first; the edit forms below the picture."""

from __future__ import annotations

from scheduling.selectors.glance import queue_glance
from scheduling.services import reconcile_pass_run, job_submit
from tests.conftest import H100


def submit(org, user, queue, pods, name):
    return job_submit(user=org[user], queue_name=queue, flavor_name=H100, name=name,
                      pod_sets=[{"name": "worker", "count": pods, "gpus_per_pod": 8}], runtime_limit_s=3600)


def test_a_borrowing_queue_and_its_lender_split_their_quota_into_the_four_parts(org):
    submit(org, "vision-researcher", "vision-main", 6, "wide")  # 48 GPUs on a nominal of 32: borrows 16
    reconcile_pass_run()
    submit(org, "language-researcher", "language-main", 4, "waits")
    reconcile_pass_run()  # pending GPUs as the pass counts them (a submission asks for a pass at once)

    glances, borrowing = queue_glance(user=org["language-researcher"])

    assert [g.name for g in glances] == ["language-main", "vision-main"]  # the reader's team first
    h100 = {g.name: next(f for f in g.flavors if f.flavor == H100) for g in glances}
    parts = {name: (f.within_nominal_gpus, f.borrowed_gpus, f.lent_out_gpus, f.free_gpus, f.pending_gpus) for name, f in h100.items()}
    assert parts == {"vision-main": (32, 16, 0, 0, 0), "language-main": (0, 0, 16, 16, 32)}
    assert [(s[0], s[2]) for s in h100["vision-main"].segments] == [("in-use", 32), ("borrowed", 16)]
    assert [(b.borrowers, b.lenders) for b in borrowing] == [([("vision-main", 16)], [("language-main", 16)])]
    assert glances[1].admitted_today == 1 and glances[1].p50_wait_today_s is not None


def test_the_queue_page_shows_the_picture_before_the_quotas(client, org):
    submit(org, "vision-researcher", "vision-main", 6, "wide")
    reconcile_pass_run()
    client.force_login(org["vision-lead"])
    page = client.get("/queues/").content.decode()
    assert page.index('id="glance-vision-main"') < page.index('id="glance-language-main"') < page.index('class="quota"')
    assert "vision-main borrows 16" in page and "lent by language-main (16)" in page
