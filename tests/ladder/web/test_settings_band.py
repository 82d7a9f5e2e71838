"""Settings: an inverted band (exit 30 %, re-entry 10 %) is refused by the form (full
page and fragment) and the API with nothing saved; the band drawing's labels never
overlap nor leave the drawing."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from billing.models import AuditEntry, ChangeCounter
from ladder.models import LadderSettings
from ladder.web.charts import CHAR_WIDTH, band_drawing
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, api, make_token
from tests.ladder.web.test_views import VALID_SETTINGS
from tests.pages import parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db

INVERTED = {**VALID_SETTINGS, "exit_cutoff_percent": "30", "reentry_min_remaining_percent": "10"}
RULE = (
    "The re-entry floor (%) must be at least the exit cutoff (%): a connection that drops "
    "out at the cutoff comes back only above the floor."
)


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


def _unchanged() -> tuple[list[Any], list[Any]]:
    return list(LadderSettings.objects.values()), list(ChangeCounter.objects.values())


@pytest.mark.parametrize("headers", [{}, htmx_headers("settings-form")], ids=["page", "fragment"])
def test_the_form_refuses_an_inverted_band_and_saves_nothing(
    operator: Client, headers: dict[str, str]
) -> None:
    before = _unchanged()

    response = operator.post("/settings/update/", INVERTED, headers=headers)

    assert response.status_code == 422
    page = parse(response.content)
    summary = page.by_class("error-summary")[0]
    assert summary.by_tag("h2")[0].text == "Nothing was saved: fix 2 fields"
    assert [li.text for li in summary.by_tag("li")] == [
        f"Exit cutoff (%): {RULE}",
        f"Re-entry floor (%): {RULE}",
    ]
    assert [e.text for e in page.by_class("field-error")] == [RULE, RULE]
    assert page.by_class("notice-success") == []
    assert _unchanged() == before
    assert not AuditEntry.objects.exists()


def test_the_api_refuses_an_inverted_band_and_saves_nothing() -> None:
    before = _unchanged()
    body = {
        "exit_cutoff_percent": 30,
        "reentry_min_remaining_percent": 10,
        "rung_budget_usd": {"cheap": None, "premium": 0},
        "budget_window": "week",
        "max_state_age_seconds": 240,
        "base_cooldown_seconds": 2,
        "max_cooldown_seconds": 60,
        "cheap_max_input_usd_per_mtok": 0.5,
    }

    response = api("put", "/api/v1/settings/ladder", make_token("ops", "operator"), body)

    assert response.status_code == 422
    assert [(e["loc"][-1], e["msg"]) for e in response.json()["detail"]] == [
        ("reentry_min_remaining_percent", RULE),
        ("exit_cutoff_percent", RULE),
    ]
    assert _unchanged() == before
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("exit_cutoff", "reentry", "labels"),
    [
        # Apart: one row, each label at its mark (the exit label ends at it).
        (2.0, 5.0, [("exit 2 %", "79.2", "146"), ("re-entry 5 %", "300.0", "146")]),
        # Equal: the labels would run together; re-entry takes the second row.
        (5.0, 5.0, [("exit 5 %", "247.2", "146"), ("re-entry 5 %", "300.0", "160")]),
        # Near 0 and near the top of the zoom: pushed inside the drawing.
        (0.5, 100.0, [("exit 0.5 %", "2.0", "146"), ("re-entry 100 %", "505.6", "146")]),
    ],
)
def test_band_labels_never_overlap_nor_leave_the_drawing(
    exit_cutoff: float, reentry: float, labels: list[tuple[str, str, str]]
) -> None:
    band = band_drawing(exit_cutoff, reentry)

    found = [(label.text, label.x, label.y) for label in band.labels]
    assert found == labels
    (exit_label, floor_label) = band.labels
    exit_right = float(exit_label.x) + len(exit_label.text) * CHAR_WIDTH
    assert exit_label.y != floor_label.y or exit_right < float(floor_label.x)
    for label in band.labels:
        assert float(label.x) >= 0
        assert float(label.x) + len(label.text) * CHAR_WIDTH <= 600
    assert band.height == int(labels[-1][2]) + 4


def test_the_settings_page_draws_two_label_rows_for_an_equal_band(operator: Client) -> None:
    LadderSettings.objects.filter(pk=1).update(
        exit_cutoff_percent=5.0, reentry_min_remaining_percent=5.0
    )

    page = parse(operator.get("/settings/").content)

    band = page.by_class("band")[0]
    assert band.attrs["viewbox"] == "0 0 600 164"
    assert [(t.text, t.attrs["x"], t.attrs["y"]) for t in band.by_class("band-label")] == [
        ("exit 5 %", "247.2", "146"),
        ("re-entry 5 %", "300.0", "160"),
    ]
