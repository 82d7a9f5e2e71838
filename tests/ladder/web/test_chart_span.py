"""The 24-hour chart spans its data (14 minutes of readings fill the plot, the span
labelled), with readable time ticks, and draws each threshold over the period it
applied (the current one labelled "now"); its data table stays."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

from billing.models import AuditEntry
from ladder import services
from ladder.web.charts import time_ticks
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_connection, make_reading
from tests.pages import Element, parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def viewer(client: Client) -> Client:
    make_connection("claude-max-1")
    for minutes, remaining in ((14, 40.0), (7, 1.0), (0, 3.0)):
        make_reading(remaining_percent=remaining, now=NOW - timedelta(minutes=minutes))
    return signed_in(client, "victor", "viewer")


def _statuses(viewer: Client) -> list[Element]:
    """The connection's status section as a full page and as its live fragment."""
    url = "/connections/claude-max-1/"
    full = parse(viewer.get(url).content).by_id("connection-status")
    fragment = parse(viewer.get(url, headers=htmx_headers("connection-status")).content)
    return [full, fragment.by_id("connection-status")]


def _move_the_band_five_minutes_ago() -> None:
    values, _ = services.effective_settings_of(services.get_settings_row())
    services.update_settings(
        {**values, "exit_cutoff_percent": 10.0, "reentry_min_remaining_percent": 30.0},
        actor="olga",
    )
    AuditEntry.objects.filter(target_type="settings").update(at=NOW - timedelta(minutes=5))


def test_fourteen_minutes_of_readings_fill_the_plot_and_the_span_is_labelled(
    viewer: Client,
) -> None:
    for status in _statuses(viewer):
        chart = status.by_class("chart")[0]

        # The plot runs from x=40 to x=708: the first reading at its left edge.
        assert [p.attrs["cx"] for p in chart.by_class("chart-point")] == ["40.0", "374.0", "708.0"]
        assert [t.text for t in chart.by_class("chart-time")] == ["11:50", "11:55", "12:00"]
        assert [(t.attrs["x"], t.attrs["text-anchor"]) for t in chart.by_class("chart-time")] == [
            ("230.9", "middle"),
            ("469.4", "middle"),
            ("708.0", "end"),
        ]
        assert status.by_class("chart-span")[0].text == (
            "The time axis shows 14 min of data, 11:46 to 12:00 UTC "
            "(no earlier reading in the last 24 h)."
        )
        # The data table stays: every reading, newest first.
        rows = status.by_class("chart-data")[0].by_tag("tbody")[0].by_tag("tr")
        assert [row.by_tag("td")[1].text for row in rows] == ["3.0 %", "1.0 %", "40.0 %"]


def test_thresholds_are_drawn_over_the_period_each_applied(viewer: Client) -> None:
    _move_the_band_five_minutes_ago()

    for status in _statuses(viewer):
        groups = status.by_class("chart-thresholds")

        assert [
            (
                g.by_class("threshold-exit")[0].attrs["x1"],
                g.by_class("threshold-exit")[0].attrs["x2"],
                g.by_class("threshold-exit")[0].attrs["y1"],
                g.by_class("threshold-floor")[0].attrs["y1"],
                g.by_tag("title")[0].text,
            )
            for g in groups
        ] == [
            (
                "40.0",
                "469.4",
                "188.4",
                "183.0",
                "exit cutoff 2 %, re-entry floor 5 % (11:46 to 11:55 UTC)",
            ),
            (
                "469.4",
                "708.0",
                "174.0",
                "138.0",
                "exit cutoff 10 %, re-entry floor 30 % (now, since 11:55 UTC)",
            ),
        ]
        assert status.by_class("chart-thresholds-text")[0].text == (
            "Thresholds drawn: exit cutoff 2 %, re-entry floor 5 % (11:46 to 11:55 UTC); "
            "exit cutoff 10 %, re-entry floor 30 % (now, since 11:55 UTC)."
        )


def test_without_a_settings_change_the_current_thresholds_span_the_plot_as_now(
    viewer: Client,
) -> None:
    for status in _statuses(viewer):
        (group,) = status.by_class("chart-thresholds")

        line = group.by_class("threshold-exit")[0]
        assert (line.attrs["x1"], line.attrs["x2"]) == ("40.0", "708.0")
        assert group.by_tag("title")[0].text == "exit cutoff 2 %, re-entry floor 5 % (now)"


def test_a_transition_row_says_its_sentence_under_the_current_settings(viewer: Client) -> None:
    _move_the_band_five_minutes_ago()

    for status in _statuses(viewer):
        rows = status.by_tag("tbody")[-1].by_tag("tr")
        assert [row.by_tag("td")[2].text for row in rows] == [
            "1.0 % left, at or below the exit cutoff of 2 % then, 10 % now"
        ]
        assert status.by_class("why")[0].text == (
            "1.0 % left, at or below the exit cutoff of 2 % then, 10 % now; "
            "re-entry needs more than 30 %"
        )


@pytest.mark.parametrize(
    ("minutes", "ticks"),
    [
        (14, ["11:50", "11:55", "12:00"]),
        (60, ["11:00", "11:10", "11:20", "11:30", "11:40", "11:50", "12:00"]),
        (90, ["10:30", "10:45", "11:00", "11:15", "11:30", "11:45", "12:00"]),
        (24 * 60, ["12:00", "16:00", "20:00", "00:00", "04:00", "08:00", "12:00"]),
    ],
)
def test_time_ticks_take_a_round_step_for_the_span(minutes: int, ticks: list[str]) -> None:
    found = time_ticks(NOW - timedelta(minutes=minutes), NOW)

    assert [f"{tick:%H:%M}" for tick in found] == ticks


def test_a_range_across_midnight_names_its_dates_and_never_reads_backwards() -> None:
    from datetime import UTC, datetime

    from ladder.web.charts import range_text

    yesterday = datetime(2026, 12, 2, 18, 26, tzinfo=UTC)
    today = datetime(2026, 12, 3, 18, 25, tzinfo=UTC)

    assert range_text(yesterday, today) == "2026-12-02 18:26 to 2026-12-03 18:25 UTC"
    assert range_text(today - timedelta(minutes=70), today) == "17:15 to 18:25 UTC"


def test_a_connection_without_readings_dates_the_thresholds_of_yesterday(
    client: Client,
) -> None:
    # No reading: the chart spans the whole 24 hours, from yesterday noon; the settings
    # changed 2 hours ago, so the earlier band ran from yesterday to then.
    make_connection("no-readings-yet")
    values, _ = services.effective_settings_of(services.get_settings_row())
    services.update_settings(
        {**values, "exit_cutoff_percent": 10.0, "reentry_min_remaining_percent": 30.0},
        actor="olga",
    )
    AuditEntry.objects.filter(target_type="settings").update(at=NOW - timedelta(hours=2))
    signed_in(client, "victor", "viewer")

    page = client.get("/connections/no-readings-yet/").content.decode()

    assert "2026-11-28 12:00 to 2026-11-29 10:00 UTC" in page
    assert "12:00 to 10:00 UTC" not in page.replace("2026-11-28 12:00 to 2026-11-29 10:00", "")
