"""The simulator's writers: the terminal table, the CSV and the HTML report."""

from __future__ import annotations

from dataclasses import replace

from ladder.core import LadderConfig
from ladder.simulator.report import (
    CSV_COLUMNS,
    TABLE_HEADER,
    ReportContext,
    format_csv,
    format_table,
    render_html,
)
from ladder.simulator.results import Policy, PolicyResult
from ladder.simulator.run import simulate_all
from tests.ladder.simulator.helpers import (
    KEY,
    TINY_TRACE,
    world,
)

# --------------------------------------------------------------------------- writers


def _results() -> tuple[PolicyResult, ...]:
    return simulate_all(world(), TINY_TRACE)


def test_format_table_has_the_header_and_a_row_per_policy() -> None:
    lines = format_table(_results()).splitlines()
    assert lines[0].split("  ")[0] == "policy"
    for column in TABLE_HEADER:
        assert column in lines[0]
    assert [line.split()[0] for line in lines[2:]] == [p.value for p in Policy]
    assert lines[2].split()[1:4] == ["0.00", "0", "2"]


def test_format_csv_has_the_columns_and_exact_spend() -> None:
    rows = [line.split(",") for line in format_csv(_results()).splitlines()]
    assert tuple(rows[0]) == CSV_COLUMNS
    thrifty = dict(zip(CSV_COLUMNS, rows[1], strict=True))
    assert thrifty["policy"] == "thrifty"
    assert thrifty["paid_spend_usd"] == "0.00400000"
    assert thrifty["refused"] == "0"
    assert thrifty["served_subscription"] == "8"
    assert dict(zip(CSV_COLUMNS, rows[3], strict=True))["paid_seconds_after_reset_max"] == ""


def test_render_html_is_self_contained_with_both_charts() -> None:
    context = ReportContext(TINY_TRACE, world().connections, LadderConfig(), {"seed": "8"})
    html = render_html(_results(), context)
    assert html.startswith("<!doctype html>")
    assert html.count("class=sim-chart") == 1 + len(Policy)  # the spend chart and a rung strip each
    assert "Cumulative paid spend" in html
    assert "Serving rung over time" in html
    for external in ("<script", "<link", "<img", "http:", "https:", "url("):
        assert external not in html


def test_the_html_report_escapes_what_the_operator_registered() -> None:
    # given a connection whose id and auth type carry markup
    hostile = replace(KEY, connection_id="<script>alert(1)</script>", auth_type="a'b\"c")
    context = ReportContext(TINY_TRACE, (hostile,), LadderConfig(), {"note": "<b>x</b>"})
    # when the report is rendered from its template
    html = render_html(_results(), context)
    # then every one of them is text, not markup
    assert "<script" not in html
    assert "<b>" not in html
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>" in html
    assert "<td>a&#x27;b&quot;c</td>" in html
    assert "<dd>&lt;b&gt;x&lt;/b&gt;</dd>" in html
