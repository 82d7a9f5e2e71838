"""Writers of the simulator's results: a terminal table, a CSV and a self-contained HTML
report (inline SVG charts, inline CSS, no JavaScript, nothing fetched), plus
`latest_report_path()` for the dashboard's link to the newest report.

The HTML is the template `ladder/simulation_report.html`; `report_context` computes what it
shows (chart geometry included), every number formatted. Only `write_report` touches
the disk.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from ladder.core import LadderConfig, Rung
from ladder.simulator.results import Policy, PolicyResult, cumulative_spend, rung_shares
from ladder.simulator.trace import Trace
from ladder.simulator.world import SimConnection

REPORT_TEMPLATE: Final = "ladder/simulation_report.html"
REPORT_NAME: Final = "report.html"
CSV_NAME: Final = "results.csv"
LATEST_NAME: Final = "latest.html"
JSON_NAME: Final = "report.json"
LATEST_JSON_NAME: Final = "latest.json"
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


# The report's own column names: plain words (the terminal table keeps its short ones).
REPORT_HEADER: Final = (
    "Policy",
    "Paid (USD)",
    "Requests refused",
    "Requests paid for",
    "Paid although a plan had quota left",
    "Paid while a plan was refilling",
    "Plan resets",
    "Seconds still paying after a reset (median / longest)",
    "Rung changes per hour",
    "Refusals by upstreams (429)",
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
    """The self-contained HTML report, from `templates/ladder/simulation_report.html`."""
    from django.template.loader import render_to_string  # a late import: the writers
    # above run without Django settings

    return render_to_string(REPORT_TEMPLATE, report_context(results, context))


def report_context(results: Sequence[PolicyResult], context: ReportContext) -> dict[str, Any]:
    """What the report template shows, every number already formatted."""
    trace = context.trace
    buckets = max(1, min(24 * 14, math.ceil(trace.hours)))
    return {
        "requests": f"{len(trace.requests):,}",
        "start": _instant(trace.start),
        "end": _instant(trace.end),
        "days": f"{trace.hours / 24:.1f}",
        "source": trace.source,
        "table_header": REPORT_HEADER,
        "rows": [_result_row(result) for result in results],
        "findings": [_finding(result, len(trace.requests)) for result in results],
        "rung_labels": [rung.label for rung in Rung],
        "spend": _spend_chart(results, trace, buckets),
        "rung_legend": list(zip(RUNG_NAMES, RUNG_COLOURS, strict=True)),
        "strips": [_rung_strip(result, trace, buckets) for result in results],
        "world": [_world_row(connection) for connection in context.connections],
        "settings": _settings(context.config, context.parameters),
    }


def _instant(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC")


def _finding(result: PolicyResult, requests: int) -> str:
    """What a policy did, in a sentence or three."""
    refused_share = 100 * result.refused / requests if requests else 0.0
    text = (
        f"{result.policy.label} paid ${_usd(result.spend_usd)}, served "
        f"{requests - result.refused:,} of {requests:,} requests and refused "
        f"{result.refused:,} ({refused_share:.1f} %)."
    )
    if result.paid_while_plan_had_headroom:
        text += (
            f" It paid for {result.paid_while_plan_had_headroom:,} requests that a plan "
            "with quota left could have served."
        )
    if result.max_paid_seconds_after_reset:
        text += (
            f" After a plan reset it kept paying for up to "
            f"{_seconds(result.max_paid_seconds_after_reset)} s before returning to the plan."
        )
    if result.failed_attempts:
        text += (
            f" Upstreams turned away {result.failed_attempts:,} attempts because a plan was "
            "used up (each request then went on to the next connection)."
        )
    return text


def _result_row(result: PolicyResult) -> dict[str, Any]:
    return {
        "policy": result.policy.value,
        "name": result.policy.label,
        "summary": result.policy.summary,
        "colour": POLICY_COLOURS[result.policy],
        "cells": (
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
        ),
        "served": [f"{count:,}" for count in result.served_by_rung],
    }


_WIDTH: Final = 960
_LEFT: Final = 64
_RIGHT: Final = 16


def _x(index: float, buckets: int) -> float:
    return _LEFT + (_WIDTH - _LEFT - _RIGHT) * index / buckets


def _day_ticks(trace: Trace, buckets: int, top: float, bottom: float) -> list[dict[str, str]]:
    """A grid line and a label at each midnight inside the trace."""
    ticks: list[dict[str, str]] = []
    span = trace.end - trace.start
    if span <= timedelta(0):
        return ticks
    day = trace.start.replace(hour=0, minute=0, second=0, microsecond=0)
    if day < trace.start:
        day += timedelta(days=1)
    while day < trace.end:
        x = _x((day - trace.start) / span * buckets, buckets)
        ticks.append(
            {
                "x": f"{x:.1f}",
                "text_x": f"{x + 3:.1f}",
                "top": f"{top}",
                "bottom": f"{bottom}",
                "text_y": f"{bottom + 14}",
                "label": day.strftime("%a %m-%d"),
            }
        )
        day += timedelta(days=1)
    return ticks


def _nice_step(maximum: float) -> float:
    if maximum <= 0:
        return 1.0
    raw = maximum / 5
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def _spend_chart(results: Sequence[PolicyResult], trace: Trace, buckets: int) -> dict[str, Any]:
    """A line per policy: cumulative billed USD at the end of each hour."""
    height, top, bottom = 300, 12, 270
    series = {r.policy: cumulative_spend(r, trace.start, trace.end, buckets) for r in results}
    peak = max((values[-1] for values in series.values() if values), default=0.0)
    step = _nice_step(peak)
    ceiling = step * max(1, math.ceil(peak / step)) if peak > 0 else step * 5
    grid = []
    value = 0.0
    while value <= ceiling + 1e-9:
        y = bottom - (bottom - top) * value / ceiling
        grid.append({"y": f"{y:.1f}", "text_y": f"{y + 4:.1f}", "label": f"${value:,.4g}"})
        value += step
    lines = []
    legend_x = _LEFT + 8
    for index, (policy, values) in enumerate(series.items()):
        points = [f"{_x(0, buckets):.1f},{bottom}"]
        points += [
            f"{_x(i + 1, buckets):.1f},{bottom - (bottom - top) * v / ceiling:.1f}"
            for i, v in enumerate(values)
        ]
        total = values[-1] if values else 0.0
        y = top + 14 + index * 16
        lines.append(
            {
                "policy": policy.label,
                "points": " ".join(points),
                "colour": POLICY_COLOURS[policy],
                "dashes": POLICY_DASHES[policy] or "none",
                "title_total": f"{values[-1] if values else 0:,.2f}",
                "legend_y": f"{y - 7}",
                "legend_text_y": f"{y - 4}",
                "legend_total": f"{total:,.2f}",
            }
        )
    return {
        "width": f"{_WIDTH}",
        "left": f"{_LEFT}",
        "right": f"{_WIDTH - _RIGHT}",
        "label_x": f"{_LEFT - 6}",
        "view_height": f"{height + 20}",
        "grid": grid,
        "ticks": _day_ticks(trace, buckets, top, bottom),
        "lines": lines,
        "legend_x": f"{legend_x}",
        "legend_x2": f"{legend_x + 14}",
        "legend_text_x": f"{legend_x + 18}",
    }


def _rung_strip(result: PolicyResult, trace: Trace, buckets: int) -> dict[str, Any]:
    """A stacked area per rung: each hour's share of requests by serving rung."""
    height, top, bottom = 110, 18, 90
    shares = rung_shares(result, trace.start, trace.end, buckets)
    cumulative = []
    for counts in shares:
        total = sum(counts)
        running = [0.0]
        for count in counts:
            running.append(running[-1] + (count / total if total else 0.0))
        cumulative.append(running)
    layers = []
    for layer in range(len(RUNG_NAMES)):
        if all(running[layer + 1] - running[layer] <= 0 for running in cumulative):
            continue
        upper: list[str] = []
        lower: list[str] = []
        for index, running in enumerate(cumulative):
            x0, x1 = _x(index, buckets), _x(index + 1, buckets)
            y_low = bottom - (bottom - top) * running[layer]
            y_high = bottom - (bottom - top) * running[layer + 1]
            upper += [f"{x0:.1f},{y_high:.1f}", f"{x1:.1f},{y_high:.1f}"]
            lower += [f"{x0:.1f},{y_low:.1f}", f"{x1:.1f},{y_low:.1f}"]
        layers.append(
            {
                "points": " ".join(upper + list(reversed(lower))),
                "colour": RUNG_COLOURS[layer],
                "name": RUNG_NAMES[layer],
            }
        )
    return {
        "policy": result.policy.label,
        "colour": POLICY_COLOURS[result.policy],
        "view_height": f"{height + 14}",
        "layers": layers,
        "ticks": _day_ticks(trace, buckets, top, bottom),
    }


def _world_row(connection: SimConnection) -> dict[str, str]:
    windows = (
        ", ".join(f"{w.name}: {w.size:,} {w.unit.value}" for w in connection.windows)
        or "never runs out"
    )
    return {
        "id": connection.connection_id,
        "provider": connection.provider,
        "auth": connection.auth_type or "-",
        "billing": f"{connection.billing.billing.value} / {connection.billing.overage.value}",
        "polled": "yes" if connection.is_polled else "no",
        "windows": windows,
    }


def _settings(config: LadderConfig, parameters: Mapping[str, str]) -> dict[str, str]:
    def budget(value: Decimal | None) -> str:
        return "unset" if value is None else f"{value.normalize():f} USD"

    return {
        "exit cutoff (a plan drops out at or below)": f"{config.exit_cutoff_percent:g} %",
        "re-entry floor (a plan comes back above)": f"{config.reentry_floor:g} %",
        "cheap budget": budget(config.cheap_budget_usd),
        "premium budget": budget(config.premium_budget_usd),
        "budget window": config.budget_window.value,
        "oldest usable quota reading": f"{config.max_state_age_seconds} s",
        "wait after a failure, first / longest": (
            f"{config.base_cooldown_seconds:g} s / {config.max_cooldown_seconds:g} s"
        ),
        **parameters,
    }


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
    # The same report as data: the dashboard shows it inside its own layout.
    json_path = out_dir / JSON_NAME
    json_path.write_text(
        json.dumps(report_context(results, context), indent=1) + "\n", encoding="utf-8"
    )
    reports_dir.mkdir(parents=True, exist_ok=True)
    latest = reports_dir / LATEST_NAME
    shutil.copyfile(html_path, latest)
    shutil.copyfile(json_path, reports_dir / LATEST_JSON_NAME)
    return ReportPaths(html=html_path, csv=csv_path, latest=latest)
