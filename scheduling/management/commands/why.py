"""`manage.py why JOB_ID`: why a job is pending, the way a person reads it — what blocks, the numbers, the fixes and their cost."""

from django.core.management.base import BaseCommand, CommandError

from scheduling.models import Job
from scheduling.selectors.explanations import job_explanation_get

LEVELS = ("quota", "fit", "nodes", "health")


class Command(BaseCommand):
    help = "Explain why a job is pending: the blocking level first, with numbers, then the other levels, then fixes with costs."

    def add_arguments(self, parser):
        parser.add_argument("job_id", type=int)

    def handle(self, *args, job_id: int, **options):
        job = Job.objects.select_related("queue__team", "flavor").filter(pk=job_id).first()
        if job is None:
            raise CommandError(f"no job with id {job_id}")
        self.stdout.write(f"Job #{job.pk} {job.name} — {job.gpus} {job.flavor.name} GPUs in queue {job.queue.name} "
                          f"(team {job.queue.team.name}), {job.state}")
        if job.state != "pending":
            self.stdout.write("It is not pending: nothing to explain.")
            return
        explanation = job_explanation_get(job=job)
        if explanation is None:
            self.stdout.write("Not considered yet: the next reconcile pass will explain it.")
            return
        self.stdout.write("\n".join(render(explanation)))


def render(e: dict) -> list[str]:
    blocking = e.get("blocking")
    lines = [f"BLOCKED BY {blocking.upper()}: {e['summary']}" if blocking else f"NOT BLOCKED: {e['summary']}"]
    position = e.get("position") or {}
    if position:
        lines.append(f"  position: #{position['in_queue']} in its queue, {position['gpus_ahead']} GPUs ahead"
                     + (f" (first: {', '.join('#' + str(a['id']) for a in position['ahead'])})" if position["ahead"] else ""))
    if e.get("estimated_start"):
        lines.append(f"  estimated start: {e['estimated_start']} (estimated at {e.get('estimated_at')})")
    elif e.get("estimated_at"):
        lines.append(f"  estimated start: not within the horizon (estimated at {e['estimated_at']})")
    ordered = [level for level in LEVELS if level == blocking] + [level for level in LEVELS if level != blocking]
    lines.append("")
    lines.append("Levels:")
    for level in ordered:
        facts = e.get(level)
        if not facts:
            continue
        mark = "✗" if level == blocking else "·"
        lines.append(f"  {mark} {level}: {_facts(level, facts)}")
    lines.append("")
    fixes = e.get("fixes") or []
    lines.append("Fixes (cheapest for others first):" if fixes else "Fixes: none — nothing but a change of the request helps.")
    for i, fix in enumerate(fixes, 1):
        who = ", ".join(fix["teams_affected"]) or "nobody"
        approval = "; needs an admin's approval" if fix["needs_approval"] else ""
        lines.append(f"  {i}. {fix['action']}: {fix['cost_gpu_hours']:.1f} GPU-hours, paid by {who}{approval}")
        lines.append(f"     {fix['detail']}")
    return lines


def _facts(level: str, facts: dict) -> str:
    if level == "quota":
        return facts.get("message") or (
            f"needs {facts['requested']}, nominal {facts['nominal']}, in use {facts['in_use']}, "
            f"cohort can lend {facts['borrowable_from_cohort']}")
    if level == "nodes":
        return facts["message"]
    return facts.get("message", "")
