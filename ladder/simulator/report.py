"""Writers of the simulator's results: a terminal table, a CSV and a self-contained HTML
report (inline SVG charts, inline CSS, no JavaScript, nothing fetched), plus
`latest_report_path()` for the dashboard's link to the newest report.

Rendering is pure (strings in, strings out); only `write_report` touches the disk.
"""

from __future__ import annotations

import csv
import io
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from html import escape
from pathlib import Path
from typing import Final

from ladder.core import LadderConfig, Rung
from ladder.simulator.results import Policy, PolicyResult, cumulative_spend, rung_shares
from ladder.simulator.trace import Trace
from ladder.simulator.world import SimConnection

REPORT_NAME: Final = "report.html"
CSV_NAME: Final = "results.csv"
LATEST_NAME: Final = "latest.html"
REPORTS_DIR_NAME: Final = "reports"

CSV_COLUMNS: Final = (
    "policy",
    "requests",
    "served",
    "refused",
    "paid_spend_usd",
    "paid_requests",
    "paid_while_plan_had_headroom",
    "paid_while_plan_in_band",
    "plan_resets",
    "paid_seconds_after_reset_median",
    "paid_seconds_after_reset_max",
    "rung_flips",
    "rung_flips_per_hour",
    "failed_attempts",
    *(f"served_{rung.label}" for rung in Rung),
)

POLICY_COLOURS: Final[dict[Policy, str]] = {
    Policy.THRIFTY: "#15803d",
    Policy.SUBSCRIPTION_ONLY: "#2563eb",
    Policy.CHEAPEST_FIRST: "#d97706",
    Policy.ORIGINAL_DESIGN: "#9333ea",
}
# Overlapping lines stay visible: the original design usually tracks thrifty closely.
POLICY_DASHES: Final[dict[Policy, str]] = {
    Policy.THRIFTY: "",
    Policy.SUBSCRIPTION_ONLY: "2 3",
    Policy.CHEAPEST_FIRST: "",
    Policy.ORIGINAL_DESIGN: "7 4",
}
# Rungs in escalation order, then refused.
RUNG_COLOURS: Final = ("#16a34a", "#0ea5e9", "#84cc16", "#f59e0b", "#dc2626", "#374151")
RUNG_NAMES: Final = (*(rung.label for rung in Rung), "refused")


def latest_report_path() -> Path | None:
    """The newest HTML report written by `manage.py simulate` (None until one is)."""
    from django.conf import settings  # a late import keeps the writers Django-free

    path = Path(settings.VAR_DIR) / REPORTS_DIR_NAME / LATEST_NAME
    return path if path.is_file() else None


# --------------------------------------------------------------------------- numbers


def _usd(value: Decimal, places: int = 2) -> str:
    return f"{value:,.{places}f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _csv_seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


# --------------------------------------------------------------------------- table


TABLE_HEADER: Final = (
    "policy",
    "paid USD",
    "refused",
    "paid reqs",
    "paid w/ plan headroom",
    "paid w/ plan in band",
    "resets",
    "paid s after reset (median / max)",
    "rung flips/h",
    "429s",
)


def format_table(results: Sequence[PolicyResult]) -> str:
    """The results as an aligned plain-text table for the terminal."""
    rows = [TABLE_HEADER]
    for result in results:
        rows.append(
            (
                result.policy.value,
                _usd(result.spend_usd),
                f"{result.refused:,}",
                f"{result.paid_requests:,}",
                f"{result.paid_while_plan_had_headroom:,}",
                f"{result.paid_while_plan_in_band:,}",
                f"{result.resets:,}",
                f"{_seconds(result.median_paid_seconds_after_reset)} / "
                f"{_seconds(result.max_paid_seconds_after_reset)}",
                f"{result.rung_flips_per_hour:.2f}",
                f"{result.failed_attempts:,}",
            )
        )
    widths = [max(len(row[index]) for row in rows) for index in range(len(TABLE_HEADER))]
    lines = []
    for number, row in enumerate(rows):
        cells = [
            cell.ljust(width) if index == 0 else cell.rjust(width)
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if number == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


# --------------------------------------------------------------------------- CSV


def format_csv(results: Sequence[PolicyResult]) -> str:
    """One row per policy, columns `CSV_COLUMNS`; spend in USD to 8 decimals."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for result in results:
        writer.writerow(
            (
                result.policy.value,
                result.requests,
                result.requests - result.refused,
                result.refused,
                f"{result.spend_usd:.8f}",
                result.paid_requests,
                result.paid_while_plan_had_headroom,
                result.paid_while_plan_in_band,
                result.resets,
                _csv_seconds(result.median_paid_seconds_after_reset),
                _csv_seconds(result.max_paid_seconds_after_reset),
                result.rung_flips,
                f"{result.rung_flips_per_hour:.4f}",
                result.failed_attempts,
                *result.served_by_rung,
            )
        )
    return buffer.getvalue()


# --------------------------------------------------------------------------- HTML


@dataclass(frozen=True, slots=True)
class ReportContext:
    """What the report says about how the results were produced."""

    trace: Trace
    connections: Sequence[SimConnection]
    config: LadderConfig
    parameters: Mapping[str, str]


def render_html(results: Sequence[PolicyResult], context: ReportContext) -> str:
    """The self-contained HTML report."""
    trace = context.trace
    buckets = max(1, min(24 * 14, math.ceil(trace.hours)))
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>OmniRoute Admin: routing policy simulation</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Routing policy simulation</h1>",
        f"<p class=lead>{len(trace.requests):,} requests from "
        f"{escape(_instant(trace.start))} to {escape(_instant(trace.end))} "
        f"({trace.hours / 24:.1f} days, {escape(trace.source)} trace), replayed against "
        "simulated providers built from the catalog, prices, settings and connections, "
        "through the product's own pure core on a simulated clock.</p>",
        "<h2>Results</h2>",
        _results_table(results),
        "<h2>Cumulative paid spend</h2>",
        _spend_chart(results, trace, buckets),
        "<h2>Serving rung over time</h2>",
        "<p>Share of each hour's requests served by each rung (refused in grey).</p>",
        _rung_legend(),
        *(_rung_strip(result, trace, buckets) for result in results),
        "<h2>Policies</h2>",
        "<dl>",
        *(
            f"<dt style='color:{POLICY_COLOURS[r.policy]}'>{escape(r.policy.value)}</dt>"
            f"<dd>{escape(r.policy.summary)}</dd>"
            for r in results
        ),
        "</dl>",
        _DEFINITIONS,
        "<h2>The simulated world</h2>",
        _world_table(context.connections),
        _settings_list(context.config, context.parameters),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _instant(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC")


def _results_table(results: Sequence[PolicyResult]) -> str:
    head = "".join(f"<th>{escape(name)}</th>" for name in TABLE_HEADER)
    rows = []
    for result in results:
        colour = POLICY_COLOURS[result.policy]
        rows.append(
            "<tr>"
            f"<th scope=row style='color:{colour}'>{escape(result.policy.value)}</th>"
            f"<td>{_usd(result.spend_usd)}</td>"
            f"<td>{result.refused:,}</td>"
            f"<td>{result.paid_requests:,}</td>"
            f"<td>{result.paid_while_plan_had_headroom:,}</td>"
            f"<td>{result.paid_while_plan_in_band:,}</td>"
            f"<td>{result.resets:,}</td>"
            f"<td>{_seconds(result.median_paid_seconds_after_reset)} / "
            f"{_seconds(result.max_paid_seconds_after_reset)}</td>"
            f"<td>{result.rung_flips_per_hour:.2f}</td>"
            f"<td>{result.failed_attempts:,}</td>"
            "</tr>"
        )
    served = "".join(f"<th>{escape(rung.label)}</th>" for rung in Rung)
    by_rung = "".join(
        f"<tr><th scope=row style='color:{POLICY_COLOURS[r.policy]}'>{escape(r.policy.value)}"
        "</th>" + "".join(f"<td>{count:,}</td>" for count in r.served_by_rung) + "</tr>"
        for r in results
    )
    return (
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "<h3>Requests served by rung</h3>"
        f"<table><thead><tr><th>policy</th>{served}</tr></thead><tbody>{by_rung}</tbody></table>"
    )


_WIDTH: Final = 960
_LEFT: Final = 64
_RIGHT: Final = 16


def _x(index: float, buckets: int) -> float:
    return _LEFT + (_WIDTH - _LEFT - _RIGHT) * index / buckets


def _day_ticks(trace: Trace, buckets: int, top: float, bottom: float) -> list[str]:
    parts: list[str] = []
    span = trace.end - trace.start
    if span <= timedelta(0):
        return parts
    day = trace.start.replace(hour=0, minute=0, second=0, microsecond=0)
    if day < trace.start:
        day += timedelta(days=1)
    while day < trace.end:
        x = _x((day - trace.start) / span * buckets, buckets)
        parts.append(
            f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{top}' y2='{bottom}' class=grid />"
            f"<text x='{x + 3:.1f}' y='{bottom + 14}' class=tick>"
            f"{escape(day.strftime('%a %m-%d'))}</text>"
        )
        day += timedelta(days=1)
    return parts


def _nice_step(maximum: float) -> float:
    if maximum <= 0:
        return 1.0
    raw = maximum / 5
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def _spend_chart(results: Sequence[PolicyResult], trace: Trace, buckets: int) -> str:
    """A line per policy: cumulative billed USD at the end of each hour."""
    height, top, bottom = 300, 12, 270
    series = {r.policy: cumulative_spend(r, trace.start, trace.end, buckets) for r in results}
    peak = max((values[-1] for values in series.values() if values), default=0.0)
    step = _nice_step(peak)
    ceiling = step * max(1, math.ceil(peak / step)) if peak > 0 else step * 5
    parts = [
        f"<svg viewBox='0 0 {_WIDTH} {height + 20}' role=img "
        "aria-label='Cumulative paid spend per policy' class=chart>"
    ]
    value = 0.0
    while value <= ceiling + 1e-9:
        y = bottom - (bottom - top) * value / ceiling
        parts.append(
            f"<line x1='{_LEFT}' x2='{_WIDTH - _RIGHT}' y1='{y:.1f}' y2='{y:.1f}' class=grid />"
            f"<text x='{_LEFT - 6}' y='{y + 4:.1f}' class='tick end'>${value:,.4g}</text>"
        )
        value += step
    parts += _day_ticks(trace, buckets, top, bottom)
    for policy, values in series.items():
        points = [f"{_x(0, buckets):.1f},{bottom}"]
        points += [
            f"{_x(index + 1, buckets):.1f},{bottom - (bottom - top) * v / ceiling:.1f}"
            for index, v in enumerate(values)
        ]
        parts.append(
            f"<polyline points='{' '.join(points)}' fill=none "
            f"stroke='{POLICY_COLOURS[policy]}' stroke-width=2 "
            f"stroke-dasharray='{POLICY_DASHES[policy] or 'none'}'>"
            f"<title>{escape(policy.value)}: "
            f"{values[-1] if values else 0:,.2f} USD</title></polyline>"
        )
    legend_x = _LEFT + 8
    for index, policy in enumerate(series):
        y = top + 14 + index * 16
        total = series[policy][-1] if series[policy] else 0.0
        parts.append(
            f"<line x1='{legend_x}' x2='{legend_x + 14}' y1='{y - 7}' y2='{y - 7}' "
            f"stroke='{POLICY_COLOURS[policy]}' stroke-width=2 "
            f"stroke-dasharray='{POLICY_DASHES[policy] or 'none'}' />"
            f"<text x='{legend_x + 18}' y='{y - 4}' class=tick>{escape(policy.value)} "
            f"(${total:,.2f})</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _rung_legend() -> str:
    items = "".join(
        f"<span><i style='background:{colour}'></i>{escape(name)}</span>"
        for name, colour in zip(RUNG_NAMES, RUNG_COLOURS, strict=True)
    )
    return f"<p class=legend>{items}</p>"


def _rung_strip(result: PolicyResult, trace: Trace, buckets: int) -> str:
    """A stacked area per rung: each hour's share of requests by serving rung."""
    height, top, bottom = 110, 18, 90
    shares = rung_shares(result, trace.start, trace.end, buckets)
    layers = len(RUNG_NAMES)
    cumulative = []
    for counts in shares:
        total = sum(counts)
        running = [0.0]
        for count in counts:
            running.append(running[-1] + (count / total if total else 0.0))
        cumulative.append(running)
    parts = [
        f"<svg viewBox='0 0 {_WIDTH} {height + 14}' role=img class=chart "
        f"aria-label='Serving rung over time: {escape(result.policy.value)}'>",
        f"<text x='{_LEFT}' y='12' class=title style='fill:{POLICY_COLOURS[result.policy]}'>"
        f"{escape(result.policy.value)}</text>",
    ]
    for layer in range(layers):
        upper: list[str] = []
        lower: list[str] = []
        for index, running in enumerate(cumulative):
            x0, x1 = _x(index, buckets), _x(index + 1, buckets)
            y_low = bottom - (bottom - top) * running[layer]
            y_high = bottom - (bottom - top) * running[layer + 1]
            upper += [f"{x0:.1f},{y_high:.1f}", f"{x1:.1f},{y_high:.1f}"]
            lower += [f"{x0:.1f},{y_low:.1f}", f"{x1:.1f},{y_low:.1f}"]
        if all(running[layer + 1] - running[layer] <= 0 for running in cumulative):
            continue
        points = " ".join(upper + list(reversed(lower)))
        parts.append(
            f"<polygon points='{points}' fill='{RUNG_COLOURS[layer]}'>"
            f"<title>{escape(RUNG_NAMES[layer])}</title></polygon>"
        )
    parts += _day_ticks(trace, buckets, top, bottom)
    parts.append("</svg>")
    return "".join(parts)


def _world_table(connections: Sequence[SimConnection]) -> str:
    rows = []
    for connection in connections:
        windows = (
            ", ".join(f"{w.name}: {w.size:,} {w.unit.value}" for w in connection.windows)
            or "never runs out"
        )
        rows.append(
            "<tr class=text>"
            f"<td>{escape(connection.connection_id)}</td>"
            f"<td>{escape(connection.provider)}</td>"
            f"<td>{escape(connection.auth_type or '-')}</td>"
            f"<td>{escape(connection.billing.billing.value)} / "
            f"{escape(connection.billing.overage.value)}</td>"
            f"<td>{'yes' if connection.is_polled else 'no'}</td>"
            f"<td>{escape(windows)}</td>"
            "</tr>"
        )
    return (
        "<table><thead><tr class=text><th>connection</th><th>provider</th><th>auth</th>"
        "<th>billing / overage</th><th>polled</th><th>windows</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _settings_list(config: LadderConfig, parameters: Mapping[str, str]) -> str:
    def budget(value: Decimal | None) -> str:
        return "unset" if value is None else f"{value.normalize():f} USD"

    items = {
        "exit cutoff": f"{config.exit_cutoff_percent:g} %",
        "re-entry floor": f"{config.reentry_floor:g} %",
        "cheap budget": budget(config.cheap_budget_usd),
        "premium budget": budget(config.premium_budget_usd),
        "budget window": config.budget_window.value,
        "max state age": f"{config.max_state_age_seconds} s",
        "cooldown base / max": (
            f"{config.base_cooldown_seconds:g} s / {config.max_cooldown_seconds:g} s"
        ),
        **parameters,
    }
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items.items())
    return f"<h3>Settings and parameters</h3><dl class=settings>{rows}</dl>"


_DEFINITIONS: Final = """<h2>How to read the numbers</h2>
<dl>
<dt>paid USD</dt><dd>Everything billed: requests served on the cheap and premium rungs at
the price catalog's rates, plus any overage of a plan that meters to paid. Plans and the
keyless path bill nothing. The simulated spend ledger starts empty.</dd>
<dt>refused</dt><dd>Requests with an empty pool, or whose every connection failed.</dd>
<dt>paid w/ plan headroom</dt><dd>Requests served on a paid rung while a plan connection
that could have served them held more than the re-entry floor in every window: usable
whatever its hysteresis state (ground truth from the simulated provider, not a
reading).</dd>
<dt>paid w/ plan in band</dt><dd>The same, but the best such plan held more than the exit
cutoff and no more than the re-entry floor in some window: the hysteresis band, which a
plan that dropped out leaves unused deliberately until its window refills (the original
design, without hysteresis, kept using it). The sliver at or below the exit cutoff is
left unused by every policy and counts nowhere.</dd>
<dt>resets</dt><dd>Plan windows that restarted after running down to the exit cutoff,
leaving the plan above the re-entry floor in every window.</dd>
<dt>paid s after reset</dt><dd>For each such reset: seconds from the reset to the last
request that a paid rung served although the plan could have taken it, before the plan
served again (0 when paid rungs served none).</dd>
<dt>rung flips/h</dt><dd>Changes of the serving rung between consecutive requests of the
same selection (model or category), per hour of trace.</dd>
<dt>429s</dt><dd>Attempts an upstream refused for an exhausted window; the gateway fell
through to the next connection within the same request.</dd>
</dl>"""

_CSS: Final = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#111827;
max-width:1000px;margin:2rem auto;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{margin-top:2rem;font-size:1.2rem}
.lead{color:#374151}table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e5e7eb;padding:.3rem .6rem;text-align:right}
th:first-child,td:first-child{text-align:left}thead th{background:#f9fafb;font-weight:600}
.chart{width:100%;height:auto;display:block}.grid{stroke:#e5e7eb;stroke-width:1}
.tick{font-size:11px;fill:#4b5563}.end{text-anchor:end}.title{font-size:12px;font-weight:600}
.legend span{margin-right:1rem;white-space:nowrap}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-1px}
dt{font-weight:600;margin-top:.4rem}dd{margin-left:1.2rem}
.text th,.text td{text-align:left}th[scope=row]{white-space:nowrap}
.settings{display:grid;grid-template-columns:max-content auto;gap:.1rem 1rem}
.settings dt,.settings dd{margin:0;font-weight:normal}.settings dt{color:#4b5563}
"""


# --------------------------------------------------------------------------- files


@dataclass(frozen=True, slots=True)
class ReportPaths:
    """Where `write_report` put the report, the CSV and the dashboard's latest copy."""

    html: Path
    csv: Path
    latest: Path


def write_report(
    results: Sequence[PolicyResult], context: ReportContext, out_dir: Path, reports_dir: Path
) -> ReportPaths:
    """Write report.html and results.csv to `out_dir`, and copy the report to
    `reports_dir`/latest.html for the dashboard's link."""
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path = out_dir / REPORT_NAME
    csv_path = out_dir / CSV_NAME
    html_path.write_text(render_html(results, context), encoding="utf-8")
    csv_path.write_text(format_csv(results), encoding="utf-8")
    reports_dir.mkdir(parents=True, exist_ok=True)
    latest = reports_dir / LATEST_NAME
    shutil.copyfile(html_path, latest)
    return ReportPaths(html=html_path, csv=csv_path, latest=latest)
