"""`manage.py fuzz_api`: schemathesis against a live server. Every operation of the OpenAPI schema, with data that
fits the schema and data that does not, as each given user, from a fixed seed; every request is counted, and every
server error and every response that does not match the schema is recorded with a curl line that repeats it."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import requests

# Path parameters are mostly random (404s); each operation is also explored on an object that exists, the first
# of its list endpoint: collection → (list path, the key of the parameter).
KNOWN = {
    "teams": ("/api/v1/teams/", "name"),
    "queues": ("/api/v1/queues/", "name"),
    "jobs": ("/api/v1/jobs/?state=pending", "id"),
    "nodes": ("/api/v1/nodes/", "name"),
    "preemptions": ("/api/v1/preemptions/", "id"),
    "priority-classes": ("/api/v1/priority-classes/", "name"),
}


@dataclass(frozen=True)
class Finding:
    user: str
    operation: str
    status: int
    title: str
    message: str
    curl: str


@dataclass
class FuzzReport:
    requests: int = 0
    seconds: float = 0.0
    statuses: Counter = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    unexplored: set[str] = field(default_factory=set)

    @property
    def server_errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if status >= 500)

    def distinct_findings(self) -> list[Finding]:
        """One finding per (operation, status, title): the first seen."""
        seen: dict[tuple, Finding] = {}
        for finding in self.findings:
            seen.setdefault((finding.operation, finding.status, finding.title), finding)
        return list(seen.values())


def fuzz(*, base_url: str, tokens: dict[str, str], examples: int, seed: int, log=print) -> FuzzReport:
    """`examples` cases per operation, user, data mode (fits the schema or not) and path (random or known)."""
    import schemathesis

    base_url = base_url.rstrip("/")
    auth = {"Authorization": f"Token {tokens['admin'] if 'admin' in tokens else next(iter(tokens.values()))}"}
    schema = schemathesis.openapi.from_url(f"{base_url}/api/schema/?format=json", headers=auth, timeout=60)
    known = _known_path_values(base_url, auth)
    report = FuzzReport()
    started = time.perf_counter()
    for user, token in tokens.items():
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token}"
        for result in schema.get_all_operations():
            operation = result.ok()
            for path_parameters in _path_variants(operation.path, known):
                modes = [schemathesis.GenerationMode.POSITIVE]
                if _has_inputs(operation, fixed_path=path_parameters is not None):
                    modes.append(schemathesis.GenerationMode.NEGATIVE)
                for mode in modes:
                    _explore(operation, mode, path_parameters, user=user, session=session, base_url=base_url,
                             examples=examples, seed=seed, report=report)
        log(f"{user}: {report.requests} requests so far, {report.server_errors} server errors, "
            f"{len(report.findings)} findings")
    report.seconds = round(time.perf_counter() - started, 1)
    return report


def _explore(operation, mode, path_parameters: dict | None, *, user: str, session: requests.Session, base_url: str,
             examples: int, seed: int, report: FuzzReport) -> None:
    import hypothesis
    from schemathesis.checks import not_a_server_error
    from schemathesis.errors import FailureGroup
    from schemathesis.specs.openapi.checks import response_schema_conformance

    @hypothesis.seed(seed)
    @hypothesis.settings(max_examples=examples, deadline=None, database=None, phases=[hypothesis.Phase.generate],
                         suppress_health_check=list(hypothesis.HealthCheck), report_multiple_bugs=False)
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
    def explore(case) -> None:
        response = case.call(base_url=base_url, session=session, timeout=60)
        report.requests += 1
        report.statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
        except FailureGroup as group:
            curl = case.as_curl_command(headers={"Authorization": "Token $TOKEN"})
            for failure in group.exceptions:
                report.findings.append(Finding(user=user, operation=operation.label, status=response.status_code,
                                               title=failure.title, message=failure.message[:2000], curl=curl))

    try:
        explore()
    except hypothesis.errors.Unsatisfiable:
        # No case of this mode exists (nothing to make invalid, say, in an operation without parameters).
        report.unexplored.add(f"{operation.label} ({mode.value} data, {'known' if path_parameters else 'random'} path)")


def _has_inputs(operation, *, fixed_path: bool) -> bool:
    """Whether the request has anything to make invalid: a body, or parameters not fixed to a known object."""
    raw = operation.definition.raw
    return "requestBody" in raw or any(p.get("in") != "path" or not fixed_path for p in raw.get("parameters", []))


def _known_path_values(base_url: str, auth: dict) -> dict[str, object]:
    known = {}
    for collection, (path, key) in KNOWN.items():
        rows = requests.get(base_url + path, headers=auth, timeout=60).json()
        rows = rows["results"] if isinstance(rows, dict) else rows
        if rows:
            known[collection] = rows[0][key]
    return known


def _path_variants(path: str, known: dict[str, object]) -> list[dict | None]:
    """Random path parameters (None), and the known object of the path's collection when it has parameters."""
    parts = [part for part in path.strip("/").split("/") if part]
    parameters = [part[1:-1] for part in parts if part.startswith("{")]
    if not parameters:
        return [None]
    collection = parts[parts.index("v1") + 1] if "v1" in parts else parts[0]
    if collection not in known:
        return [None]
    return [None, {parameters[0]: known[collection]}]


def table(report: FuzzReport, *, examples: int, seed: int) -> str:
    statuses = ", ".join(f"{status}: {count}" for status, count in sorted(report.statuses.items()))
    lines = [
        f"fuzz_api: {report.requests} requests in {report.seconds} s ({examples} examples per operation, user, "
        f"data mode and path; seed {seed})",
        f"  server errors (5xx): {report.server_errors}",
        f"  findings (server errors and responses that do not match the schema): {len(report.findings)}",
        f"  statuses: {statuses}",
    ]
    if report.unexplored:
        lines.append(f"  no case could be generated for: {', '.join(sorted(report.unexplored))}")
    for finding in report.distinct_findings():
        lines += ["", f"[{finding.user}] {finding.operation} -> {finding.status}: {finding.title}", finding.message,
                  finding.curl]
    return "\n".join(lines)
