"""Job traces: what was submitted, when, how big, and how long it really ran.

Two sources:

- **Philly** (Microsoft, 2017): the per-job table the Pollux authors derived from the Philly
  `cluster_job_log` (`timestamp, duration, num_gpus, gpu_time, cluster`), restricted to a window of
  submit dates and to the virtual clusters (VCs) of a VC size table. A VC is a team.
- **A generic CSV** that users bring: `submit_time_s, duration_s, num_gpus` and optionally
  `team, gpus_per_pod, priority, runtime_limit_s, flavor`. Every bad row is reported with its line
  number; nothing is dropped silently.
- **An ITP-shaped log** (Microsoft's ITP traces, as shipped with ElasticFlow): `job_id,
  submission_time, duration, num_gpu`, no teams and no fleet. Teams come from hashing an id
  column into N buckets; the fleet is sized from the trace's load (`fleet.fleet_for_load`).

The true duration is the simulator's secret: the scheduler sees only `runtime_limit_s` (the user's
estimate), which is `None` for Philly because the trace holds no user estimate.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import random
import zlib
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

DEFAULT_TEAM = "default"
DATA_DIR = Path(__file__).resolve().parent / "data"
PHILLY_JOBS = "philly/philly_jobs_pollux.csv.gz"
PHILLY_VCS = "philly/vc_node_count_heliosartifact.csv"
PHILLY_FROM = "2017-10-01"
PHILLY_TO = "2017-11-30"
"""The Helios SC'21 artifact's window: jobs submitted 2017-10-01 00:00 to 2017-11-30 23:59:59."""


class TraceError(ValueError):
    """A trace file is invalid; `errors` lists every bad row as `line N: …`."""

    def __init__(self, source: str, errors: list[str]):
        self.source = source
        self.errors = errors
        shown = errors[:20]
        more = f"\n  … and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
        super().__init__(f"{source}: {len(errors)} bad row(s):\n  " + "\n  ".join(shown) + more)


@dataclass(frozen=True, slots=True)
class TraceJob:
    id: int
    submit_s: float
    """Seconds from the start of the trace."""
    duration_s: float
    """True run time: the job ends after this much work. The scheduler never sees it."""
    gpus: int
    team: str = DEFAULT_TEAM
    gpus_per_pod: int | None = None
    """None: one pod when the job fits a node, else whole-node pods (see `scenario.pod_sets_for`)."""
    priority: int = 0
    runtime_limit_s: int | None = None
    flavor: str | None = None
    queue: str | None = None
    """None: the team's queue under the policy (a team may spread its jobs over queues of its own)."""
    priority_class: str | None = None
    checkpoint_interval_s: int | None = None
    """None: the scenario's checkpoint interval; 0: this job never checkpoints."""
    idle_hold_s: float = 0.0
    """After its work the job keeps its GPUs, idle, this much longer (a hoarded allocation)."""
    cancel_at_s: float | None = None
    """The owner cancels the job at this time, pending or running (a placeholder)."""
    stands_for: int | None = None
    """The id of the job this one is a piece of or holds a place for (scenario bookkeeping; the core never sees it)."""


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    jobs: tuple[TraceJob, ...]
    """Sorted by submit time, ids 1…n in that order."""
    origin: datetime | None = None
    """Wall-clock time of submit_s = 0, when the trace has dates."""

    @property
    def teams(self) -> tuple[str, ...]:
        return tuple(sorted({job.team for job in self.jobs}))

    @property
    def gpu_seconds(self) -> float:
        return sum(job.gpus * job.duration_s for job in self.jobs)


def _renumber(jobs: list[TraceJob]) -> tuple[TraceJob, ...]:
    """Ids 1…n in submit order; a job that stands for another keeps pointing at it."""
    ordered = sorted(jobs, key=lambda job: (job.submit_s, job.id))
    new_id = {job.id: i for i, job in enumerate(ordered, start=1)}
    return tuple(replace(job, id=new_id[job.id], stands_for=new_id.get(job.stands_for)) for job in ordered)


def jittered(trace: Trace, *, seed: int, within_s: float) -> Trace:
    """The same jobs, each submitted up to `within_s` later (seeded; whole seconds), renumbered in the new order.

    A replay under contention is chaotic: which of two jobs a minute apart gets the next whole node reorders what
    follows. Replays of jittered copies tell a policy's effect from the chance alignment of one log's timestamps.
    """
    rng = random.Random(seed)
    moved = []
    for job in trace.jobs:
        delay_s = round(rng.uniform(0.0, within_s))
        cancel_at_s = job.cancel_at_s + delay_s if job.cancel_at_s is not None else None
        moved.append(replace(job, submit_s=job.submit_s + delay_s, cancel_at_s=cancel_at_s))
    return replace(trace, name=f"{trace.name}, jittered (seed {seed})", jobs=_renumber(moved))


# --- Philly ----------------------------------------------------------------------------------


def philly_vc_nodes(path: str | Path | None = None) -> dict[str, int]:
    """VC → number of 8-GPU nodes (the Helios artifact's `philly_vc.csv`), in file order."""
    path = Path(path) if path else DATA_DIR / PHILLY_VCS
    errors, vcs = [], {}
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        for line, row in enumerate(reader, start=2):
            try:
                vcs[row["vc"].strip()] = int(row["node num"])
            except (KeyError, TypeError, ValueError):
                errors.append(f"line {line}: expected 'vc,node num' with an integer node count, got {row}")
    if errors:
        raise TraceError(str(path), errors)
    return vcs


def load_philly(
    path: str | Path | None = None,
    *,
    vcs: dict[str, int] | None = None,
    date_from: str = PHILLY_FROM,
    date_to: str = PHILLY_TO,
) -> Trace:
    """Philly jobs submitted on `date_from` … `date_to` (both whole days, inclusive) in the given VCs."""
    path = Path(path) if path else DATA_DIR / PHILLY_JOBS
    vcs = philly_vc_nodes() if vcs is None else vcs
    start = datetime.fromisoformat(date_from)
    end = datetime.fromisoformat(date_to) + timedelta(days=1)
    errors: list[str] = []
    jobs: list[TraceJob] = []
    with gzip.open(path, "rt", newline="") as handle:
        reader = csv.DictReader(handle)
        for line, row in enumerate(reader, start=2):
            if row.get("cluster") not in vcs:
                continue
            try:
                submitted = datetime.fromisoformat(row["timestamp"])
                duration = float(row["duration"])
                gpus = int(row["num_gpus"])
            except (KeyError, TypeError, ValueError) as error:
                errors.append(f"line {line}: {error}")
                continue
            if not start <= submitted < end:
                continue
            if gpus <= 0 or not duration > 0 or not math.isfinite(duration):
                errors.append(f"line {line}: num_gpus must be > 0 and duration > 0, got {gpus} and {duration}")
                continue
            jobs.append(TraceJob(line, (submitted - start).total_seconds(), duration, gpus, row["cluster"]))
    if errors:
        raise TraceError(str(path), errors)
    return Trace(f"philly {date_from}..{date_to}", _renumber(jobs), origin=start)


# --- generic CSV -----------------------------------------------------------------------------

REQUIRED = ("submit_time_s", "duration_s", "num_gpus")
OPTIONAL = ("team", "gpus_per_pod", "priority", "runtime_limit_s", "flavor")


def load_csv(path: str | Path) -> Trace:
    """The generic job-trace CSV (gzip allowed). Raises TraceError listing every bad row by line number."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as handle:
        return parse_csv(handle.read(), source=str(path))


def parse_csv(text: str, *, source: str = "trace") -> Trace:
    errors: list[str] = []
    jobs: list[TraceJob] = []
    for line, row in _rows(text, source, errors, required=REQUIRED, optional=OPTIONAL):
        problems: list[str] = []
        submit = _number(row, "submit_time_s", float, problems, minimum=0)
        duration = _number(row, "duration_s", float, problems, minimum=0, strict=True)
        gpus = _number(row, "num_gpus", int, problems, minimum=1)
        per_pod = _number(row, "gpus_per_pod", int, problems, minimum=1, optional=True)
        priority = _number(row, "priority", int, problems, optional=True)
        limit = _number(row, "runtime_limit_s", int, problems, minimum=1, optional=True)
        if per_pod is not None and gpus is not None and gpus % per_pod:
            problems.append(f"num_gpus {gpus} is not a multiple of gpus_per_pod {per_pod}")
        if problems:
            errors.append(f"line {line}: " + "; ".join(problems))
            continue
        jobs.append(
            TraceJob(
                line, submit, duration, gpus, row.get("team") or DEFAULT_TEAM, per_pod, priority or 0, limit,
                row.get("flavor") or None,
            )
        )
    _raise_if_unusable(source, jobs, errors)
    return Trace(source, _renumber(jobs))


def _rows(text: str, source: str, errors: list[str], *, required: tuple[str, ...], optional: tuple[str, ...] | None = None):
    """(line number, stripped row) for every row with all its fields; a bad header raises, a short row adds an error.
    `optional` None: any other column is allowed (and ignored)."""
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip() for name in (reader.fieldnames or [])]
    missing = [name for name in required if name not in header]
    if missing:
        raise TraceError(source, [f"line 1: missing column(s) {', '.join(missing)}; required: {', '.join(required)}"])
    if optional is not None:
        unknown = [name for name in header if name not in required + optional]
        if unknown:
            raise TraceError(source, [f"line 1: unknown column(s) {', '.join(unknown)}; optional: {', '.join(optional)}"])
    reader.fieldnames = header
    for row in reader:
        if None in row or any(value is None for value in row.values()):
            errors.append(f"line {reader.line_num}: expected {len(header)} fields")
            continue
        yield reader.line_num, {key: value.strip() for key, value in row.items()}


def _raise_if_unusable(source: str, jobs: list[TraceJob], errors: list[str]) -> None:
    if errors:
        raise TraceError(source, errors)
    if not jobs:
        raise TraceError(source, ["no jobs"])


def _number(row, name, kind, problems, *, minimum=None, strict=False, optional=False):
    raw = row.get(name, "")
    if raw == "":
        if not optional:
            problems.append(f"{name} is empty")
        return None
    try:
        value = kind(raw) if kind is float else int(raw)
    except ValueError:
        problems.append(f"{name} {raw!r} is not {'a number' if kind is float else 'an integer'}")
        return None
    if kind is float and not math.isfinite(value):
        problems.append(f"{name} {raw!r} is not finite")
        return None
    if minimum is not None and (value <= minimum if strict else value < minimum):
        problems.append(f"{name} must be {'>' if strict else '≥'} {minimum}, got {raw}")
        return None
    return value


# --- ITP-shaped logs: no teams, no fleet ----------------------------------------------------

ITP_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")


def team_of(job_id: str, teams: int) -> str:
    """A stable team for an id: CRC-32 of the id modulo `teams` (the same on every run and machine)."""
    return f"team{zlib.crc32(job_id.encode()) % teams}"


def load_itp(path: str | Path, *, teams: int = 4, id_column: str = "job_id") -> Trace:
    """A log of `job_id, submission_time, duration, num_gpu` (gzip allowed), teams hashed from `id_column`."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as handle:
        return parse_itp(handle.read(), source=str(path), teams=teams, id_column=id_column)


def parse_itp(text: str, *, source: str = "trace", teams: int = 4, id_column: str = "job_id") -> Trace:
    if teams < 1:
        raise ValueError(f"--teams must be ≥ 1, got {teams}")
    required = tuple(dict.fromkeys((id_column, *ITP_COLUMNS[1:])))
    errors: list[str] = []
    jobs: list[TraceJob] = []
    for line, row in _rows(text, source, errors, required=required):
        problems: list[str] = []
        submit = _number(row, "submission_time", float, problems, minimum=0)
        duration = _number(row, "duration", float, problems, minimum=0, strict=True)
        gpus = _number(row, "num_gpu", int, problems, minimum=1)
        if not row[id_column]:
            problems.append(f"{id_column} is empty")
        if problems:
            errors.append(f"line {line}: " + "; ".join(problems))
            continue
        jobs.append(TraceJob(line, submit, duration, gpus, team_of(row[id_column], teams)))
    _raise_if_unusable(source, jobs, errors)
    start = min(job.submit_s for job in jobs)
    shifted = [replace(job, submit_s=job.submit_s - start) for job in jobs]
    return Trace(source, _renumber(shifted))
