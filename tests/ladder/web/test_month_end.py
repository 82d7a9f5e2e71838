"""The budget window's end is written one way on every page: its last day, as the spend
page says it ("2026-11-01 to 2026-11-30"), never the next window's first day."""

from __future__ import annotations

import pytest
from django.test import Client

from omniroute_admin import dashboard
from tests.ladder.factories import NOW
from tests.worlds import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.mark.parametrize("url", ["/", "/settings/", "/spend/"])
def test_every_page_ends_the_month_on_its_last_day(client: Client, url: str) -> None:
    signed_in(client, "olga", "operator")

    text = client.get(url).content.decode()

    assert "2026-11-01 to 2026-11-30" in text
    assert "to 2026-12-01" not in text
