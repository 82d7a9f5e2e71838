"""A write is judged under the config it commits with: a reading, an event, a spend report
or a batch of them whose snapshot of the config was taken before a config change that
commits ahead of it never leaves a decision cached under the new config that the write
would change (ladder.services.readings.settle_config_race,
ladder.services.spend_totals.must_move_after_spend). Each test interleaves the config
change deterministically: a patched snapshot loader makes the change, and warms this
process's cache under it, after the write's snapshot was taken and before it commits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from billing import services as billing_services
from billing.models import ModelPrice
from ladder import services
from ladder.core import SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID, AutoId
from ladder.services import events, readings, spend, spend_batch
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading

pytestmark = pytest.mark.django_db

LATER = NOW + timedelta(seconds=30)
ASKED = NOW + timedelta(seconds=40)


def _settings(**changes: Any) -> None:
    row = services.get_settings_row()
    values = {name: getattr(row, name) for name in services.SETTINGS_FIELDS}
    services.update_settings({**values, **changes}, actor="operator")


def _served(auto_id: AutoId) -> set[tuple[str, str | None]]:
    """The (model, connection) pairs this process answers for `auto_id` (warm cache)."""
    decision = services.decide_registered(auto_id, now=ASKED)
    return {(c.model, c.connection_id) for c in decision.candidates}


def _fresh(auto_id: AutoId) -> set[tuple[str, str | None]]:
    """The same answer from a freshly started process (no cache)."""
    services.clear_caches()
    return _served(auto_id)


def _racing(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, change: Callable[[], None]
) -> Iterator[None]:
    """Patch `module.name` (a write's snapshot loader) so that, once the write has taken
    its snapshot, `change` commits and this process decides under the new config."""
    real = getattr(module, name)

    def loader(*args: Any, **kwargs: Any) -> Any:
        snapshot = real(*args, **kwargs)
        change()
        return snapshot

    monkeypatch.setattr(module, name, loader)
    yield


@pytest.fixture
def plan() -> None:
    """A curated Claude plan at 50 %, served by auto/subscription under a 2 % cutoff."""
    make_connection()
    make_candidate()
    make_reading(remaining_percent=50.0)
    assert _served(SUBSCRIPTION_AUTO_ID) == {("claude-sonnet-4-5", "claude-max-1")}


def _raise_cutoff_and_warm() -> None:
    _settings(exit_cutoff_percent=40.0, reentry_min_remaining_percent=45.0)
    # A request right after the settings write: decided under the new config and the
    # plan's 50 % reading (the racing write has not committed), so the plan is served.
    assert _served(SUBSCRIPTION_AUTO_ID) == {("claude-sonnet-4-5", "claude-max-1")}


def test_a_reading_judged_before_a_cutoff_raise_does_not_stay_served(
    plan: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    list(_racing(monkeypatch, readings, "write_snapshot", _raise_cutoff_and_warm))

    make_reading(remaining_percent=30.0, now=LATER)

    assert _served(SUBSCRIPTION_AUTO_ID) == set() == _fresh(SUBSCRIPTION_AUTO_ID)


def test_an_event_judged_before_a_cutoff_raise_does_not_stay_served(
    plan: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    list(_racing(monkeypatch, events, "write_snapshot", _raise_cutoff_and_warm))

    services.apply_event(
        "claude-max-1",
        kind="success",
        headers={
            "anthropic-ratelimit-unified-status": "allowed",
            "anthropic-ratelimit-unified-5h-utilization": "0.7",
        },
        now=LATER,
    )

    assert _served(SUBSCRIPTION_AUTO_ID) == set() == _fresh(SUBSCRIPTION_AUTO_ID)


def test_a_write_with_no_config_change_meanwhile_costs_one_query_more_and_no_bump(
    plan: None, django_assert_num_queries: Any
) -> None:
    state = billing_services.change_counters()[1]

    # counters; savepoint; lock; insert reading; update connection; release; then the
    # config counter, read once the reading committed.
    with django_assert_num_queries(7):
        make_reading(remaining_percent=42.0, now=LATER)

    assert billing_services.change_counters()[1] == state


# --- spend: a budget lowered or set while reports are written ------------------------------


@pytest.fixture
def cheap_rung() -> None:
    """An uncurated OpenAI key serving a cheap model in auto/thrifty, $5 spent of a $100
    monthly budget."""
    ModelPrice.objects.create(
        provider="openai",
        model="gpt-4o-mini",
        input_usd_per_mtok=Decimal("0.15"),
        output_usd_per_mtok=Decimal("0.6"),
    )
    make_connection("openai-key", provider="openai", auth_type="apikey")
    make_candidate("openai", "gpt-4o-mini", connection_id="openai-key")
    _settings(cheap_budget_usd=Decimal(100))
    _spend("before", "5")
    assert _served(THRIFTY_AUTO_ID) == {("gpt-4o-mini", "openai-key")}


def _spend_input(request_id: str, cost: str) -> services.SpendInput:
    return services.SpendInput(
        request_id, "openai-key", "openai", "gpt-4o-mini", Decimal(cost), occurred_at=NOW
    )


def _spend(request_id: str, cost: str) -> None:
    services.record_spend(_spend_input(request_id, cost), now=NOW)


def _budget_and_warm(budget: Decimal | None) -> Callable[[], None]:
    def change() -> None:
        _settings(cheap_budget_usd=budget)
        assert _served(THRIFTY_AUTO_ID) == {("gpt-4o-mini", "openai-key")}

    return change


def test_a_budget_lowered_during_a_spend_batch_is_enforced_by_a_warm_process(
    cheap_rung: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    list(_racing(monkeypatch, spend_batch, "current_spend_snapshot", _budget_and_warm(Decimal(10))))

    batch = services.record_spend_batch(
        [_spend_input("b1", "10"), _spend_input("b2", "10")], now=NOW
    )

    assert batch.created == 2
    assert services.spend_summary(now=NOW).rungs["cheap"].is_exhausted is True
    assert _served(THRIFTY_AUTO_ID) == set() == _fresh(THRIFTY_AUTO_ID)


def test_a_budget_lowered_during_a_single_spend_report_is_enforced_by_a_warm_process(
    cheap_rung: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    list(_racing(monkeypatch, spend, "current_spend_snapshot", _budget_and_warm(Decimal(10))))

    _spend("one", "20")

    assert _served(THRIFTY_AUTO_ID) == set() == _fresh(THRIFTY_AUTO_ID)


def test_a_budget_set_during_spend_on_an_unbudgeted_rung_is_enforced_by_a_warm_process(
    cheap_rung: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _settings(cheap_budget_usd=None)
    list(_racing(monkeypatch, spend, "current_spend_snapshot", _budget_and_warm(Decimal(10))))

    _spend("one", "20")

    assert _served(THRIFTY_AUTO_ID) == set() == _fresh(THRIFTY_AUTO_ID)
