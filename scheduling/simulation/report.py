"""Printing a comparison table and writing the Plotly report."""

from __future__ import annotations

import math
from pathlib import Path

ROWS = (
    ("policy", "{name}"),
    ("jobs", "{jobs:,}"),
    ("mean wait", "{mean_wait_s:,.0f}"),
    ("p50", "{p50_wait_s:,.0f}"),
    ("p95", "{p95_wait_s:,.0f}"),
    ("p99", "{p99_wait_s:,.0f}"),
    (">8 GPU mean", "{big:,.0f}"),
    ("mean JCT", "{mean_jct_s:,.0f}"),
    ("alloc %", "{alloc:.1f}"),
    ("whole free", "{mean_whole_free_nodes:.1f}"),
    ("preempt", "{preemptions:,}"),
    ("GPU-h lost", "{gpu_hours_lost:,.0f}"),
    ("worst team ×iso", "{worst}"),
    ("wall s", "{wall_s:.1f}"),
    ("CPU s", "{cpu_s:.1f}"),
    ("events/s", "{events_per_s:,.0f}"),
)


def _cells(name: str, summary: dict) -> list[str]:
    ratios = summary.get("wait_vs_fifo_isolated") or {}
    worst = max(ratios.items(), key=lambda kv: kv[1], default=None)
    values = dict(
        summary,
        name=name,
        big=summary["over_8_gpus"]["mean_wait_s"],
        alloc=100 * summary["mean_allocation"],
        worst="-" if worst is None else ("inf" if math.isinf(worst[1]) else f"{worst[1]:.2f} ({worst[0]})"),
    )
    return [fmt.format(**values) for _, fmt in ROWS]


def table(policies: dict[str, dict]) -> str:
    """A fixed-width table, waits in seconds; one row per policy."""
    rows = [[title for title, _ in ROWS]] + [_cells(name, s) for name, s in policies.items()]
    widths = [max(len(row[k]) for row in rows) for k in range(len(ROWS))]
    lines = ["  ".join(cell.rjust(w) if k else cell.ljust(w) for k, (cell, w) in enumerate(zip(row, widths))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def team_table(policies: dict[str, dict]) -> str:
    teams = sorted({team for s in policies.values() for team in s["per_team"]})
    header = ["team"] + list(policies)
    rows = [header]
    for team in teams:
        rows.append([team] + [f"{s['per_team'].get(team, {}).get('mean_wait_s', float('nan')):,.0f}" for s in policies.values()])
    widths = [max(len(r[k]) for r in rows) for k in range(len(header))]
    lines = ["  ".join(c.rjust(w) if k else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "mean wait per team (s)\n" + "\n".join(lines)


def write_plot(document: dict, path: str | Path) -> None:
    """A self-contained HTML report (plotly.js inlined, no CDN): wait CDF, allocation, free nodes, team waits."""
    import plotly.graph_objects as go  # the only non-stdlib import of the simulator, used for --plot only
    from plotly.subplots import make_subplots

    policies = document["policies"]
    figure = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=(
            "Queueing delay CDF (total time pending per job)",
            "GPUs allocated over time",
            "Whole free nodes over time",
            "Mean queueing delay per team",
        ),
    )
    teams = sorted({team for s in policies.values() for team in s["per_team"]})
    for k, (name, s) in enumerate(policies.items()):
        color = _PALETTE[k % len(_PALETTE)]
        quantiles = s["wait_quantiles_s"]
        figure.add_trace(
            go.Scatter(
                x=[max(q, 1.0) for q in quantiles], y=[i / 2 for i in range(len(quantiles))], name=name,
                legendgroup=name, line={"color": color}, hovertemplate="%{y}% of jobs wait ≤ %{x:.0f} s",
            ),
            row=1, col=1,
        )
        timeline = s["timeline"]
        figure.add_trace(
            go.Scatter(x=timeline["t_h"], y=timeline["allocated_gpus"], name=name, legendgroup=name,
                       showlegend=False, line={"color": color, "width": 1}),
            row=1, col=2,
        )
        figure.add_trace(
            go.Scatter(x=timeline["t_h"], y=timeline["whole_free_nodes"], name=name, legendgroup=name,
                       showlegend=False, line={"color": color, "width": 1}),
            row=2, col=1,
        )
        figure.add_trace(
            go.Bar(x=teams, y=[s["per_team"].get(t, {}).get("mean_wait_s", 0) for t in teams], name=name,
                   legendgroup=name, showlegend=False, marker={"color": color}),
            row=2, col=2,
        )
    figure.update_xaxes(type="log", title_text="wait (s, log; 0 shown as 1)", row=1, col=1)
    figure.update_yaxes(title_text="% of jobs", row=1, col=1)
    figure.update_xaxes(title_text="hours since trace start", row=1, col=2)
    figure.update_xaxes(title_text="hours since trace start", row=2, col=1)
    figure.update_yaxes(title_text="seconds", row=2, col=2)
    figure.update_layout(
        title=f"Gangway simulator: {document.get('scenario', {}).get('name', '')}",
        barmode="group", height=900, template="plotly_white",
    )
    figure.write_html(str(path), include_plotlyjs=True, full_html=True)


_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
