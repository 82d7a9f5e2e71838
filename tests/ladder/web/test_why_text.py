"""The dashboard's "why" text for people: raw precision never shown (99.6 %, not
99.624754 %), and a stored hysteresis sentence said again under the current settings
on the connections list (full page and live fragment)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

from ladder import services
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
    make_reading(remaining_percent=1.0, now=NOW - timedelta(minutes=2))
    make_reading(remaining_percent=4.96, now=NOW)
    return signed_in(client, "victor", "viewer")


def _list_rows(viewer: Client) -> list[Element]:
    full = parse(viewer.get("/connections/").content)
    fragment = parse(viewer.get("/connections/", headers=htmx_headers("connections-table")).content)
    return [
        page.find_all(lambda e: e.attrs.get("data-connection") == "claude-max-1")[0]
        for page in (full, fragment)
    ]


def test_a_percent_beside_its_threshold_keeps_the_decimals_that_tell_the_side(
    viewer: Client,
) -> None:
    for row in _list_rows(viewer):
        # 4.96 % with a re-entry floor of 5 %: "5.0 % left" would contradict the state.
        assert row.by_class("remaining")[0].text == "4.96 % left"
        assert row.by_class("why")[0].text == (
            "1.0 % left, at or below the exit cutoff of 2 %; re-entry needs more than 5 %"
        )


def test_raw_precision_is_rounded_to_one_decimal(viewer: Client) -> None:
    make_reading(remaining_percent=99.624754, now=NOW)

    for row in _list_rows(viewer):
        assert row.by_class("remaining")[0].text == "99.6 % left"
        assert row.by_class("why")[0].text == "99.6 % left, above the re-entry floor of 5 %"
    page = parse(viewer.get("/connections/claude-max-1/").content)
    assert page.by_class("remaining")[0].text == "99.6 % left"


def test_a_stored_floor_under_new_settings_is_said_as_then_and_now(viewer: Client) -> None:
    values, _ = services.effective_settings_of(services.get_settings_row())
    services.update_settings({**values, "reentry_min_remaining_percent": 30.0}, actor="olga")

    for row in _list_rows(viewer):
        assert row.by_class("why")[0].text == (
            "1.0 % left, at or below the exit cutoff of 2 %; re-entry needs more than 30 %"
        )
