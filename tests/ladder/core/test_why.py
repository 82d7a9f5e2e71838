"""The "why" sentences for people: percents to one decimal (on the true side of the
threshold they are compared with), money to the cent, and stored hysteresis sentences
presented again under the current settings (ladder/core/why.py)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from ladder.core import Grouping, HysteresisState, LadderConfig, QuotaStatus, Reading
from ladder.core.decide import connection_cause
from ladder.core.prose import money_text, percent_text
from ladder.core.quota import hysteresis_after
from ladder.core.why import hysteresis_why, past_tense
from tests.ladder.core.factories import CONFIG, DROPPED, NOW, view

IN_PLAY = HysteresisState.IN_PLAY
DROPPED_OUT = HysteresisState.DROPPED_OUT
# The settings an operator moved to after the sentences were stored (floor 5 -> 30).
MOVED = LadderConfig(exit_cutoff_percent=10.0, reentry_min_remaining_percent=30.0)


@pytest.mark.parametrize(
    ("value", "beside", "text"),
    [
        (99.624754, None, "99.6"),
        (3.0, None, "3.0"),
        (0.0, None, "0.0"),
        (1.25, None, "1.2"),  # round half to even, as Python formats
        (4.96, 5.0, "4.96"),  # "5.0 % left, re-entry needs more than 5 %" would lie
        (5.04, 5.0, "5.04"),
        (2.0, 2.0, "2.0"),  # exactly on the threshold reads as on it
        (4.9999999, 5.0, "4.9999999"),
        (99.624754, 5.0, "99.6"),
    ],
)
def test_percent_text_has_one_decimal_on_the_true_side_of_its_threshold(
    value: float, beside: float | None, text: str
) -> None:
    assert percent_text(value, beside=beside) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal("10"), "10.00"),
        (Decimal("12.5"), "12.50"),
        (Decimal("10.25"), "10.25"),
        (Decimal("10.000000"), "10.00"),
        (Decimal("0.0042"), "0.0042"),  # a fraction of a cent never reads as nothing
    ],
)
def test_money_text_is_to_the_cent(value: Decimal, text: str) -> None:
    assert money_text(value) == text


def test_a_new_hysteresis_sentence_rounds_its_percent() -> None:
    reading = Reading(QuotaStatus.SAFE, 99.624754, None, NOW)

    after = hysteresis_after(DROPPED, reading, CONFIG)

    assert after.reason == "99.6 % left, above the re-entry floor of 5 %"


@pytest.mark.parametrize(
    ("state", "stored", "is_current", "text"),
    [
        # The floor moved from 5 to 30 after the flip: the stored 5 is history, not the rule.
        (
            DROPPED_OUT,
            "Upstream reported EXHAUSTED, 0.0 % left; re-entry needs more than 5 %",
            True,
            "Upstream reported EXHAUSTED with 0.0 % left; re-entry needs more than 30 %",
        ),
        (
            DROPPED_OUT,
            "Upstream reported EXHAUSTED; re-entry needs more than 5 %",
            False,
            "Upstream reported EXHAUSTED; re-entry needed more than 5 % then, 30 % now",
        ),
        (
            DROPPED_OUT,
            "1.0 % left, at or below the exit cutoff of 2 %",
            True,
            "1.0 % left, at or below the exit cutoff of 2 % then, 10 % now; "
            "re-entry needs more than 30 %",
        ),
        (
            DROPPED_OUT,
            "1.0 % left, at or below the exit cutoff of 2 %",
            False,
            "1.0 % left, at or below the exit cutoff of 2 % then, 10 % now",
        ),
        (
            IN_PLAY,
            "99.624754 % left, above the re-entry floor of 5 %",
            True,
            "99.6 % left, above the re-entry floor of 5 % then, 30 % now",
        ),
        (
            IN_PLAY,
            "5.04 % left, above the re-entry floor of 5 %",
            False,
            "5.04 % left, above the re-entry floor of 5 % then, 30 % now",
        ),
        # Sentences the core does not write this way: raw decimals rounded, kept.
        (IN_PLAY, "in play since its first reading", True, "in play since its first reading"),
        (IN_PLAY, "pushed: 42.123456 % left", False, "pushed: 42.1 % left"),
        (
            DROPPED_OUT,
            "1.0 % left",
            True,
            "1.0 % left; re-entry needs more than 30 %",
        ),
    ],
)
def test_a_stored_sentence_is_presented_under_the_current_settings(
    state: HysteresisState, stored: str, is_current: bool, text: str
) -> None:
    assert hysteresis_why(state, stored, MOVED, is_current=is_current) == text


def test_a_stored_sentence_under_unchanged_settings_reads_as_stored() -> None:
    stored = "1.0 % left, at or below the exit cutoff of 2 %"

    assert hysteresis_why(DROPPED_OUT, stored, CONFIG, is_current=False) == stored
    assert hysteresis_why(DROPPED_OUT, stored, CONFIG, is_current=True) == (
        f"{stored}; re-entry needs more than 5 %"
    )


# --- stored sentences as history ------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "past"),
    [
        (
            "Cooling down until 2026-11-29 12:01:25 UTC (85 s from now)",
            "Was cooling down until 2026-11-29 12:01:25 UTC",
        ),
        (
            "Model scope opus: cooling down until 2026-11-29 12:01:25 UTC (85 s from now)",
            "Model scope opus: was cooling down until 2026-11-29 12:01:25 UTC",
        ),
        ("In the pool on the free rung", "Entered on the free rung"),
        ("Connection groq-key is marked inactive", "Connection groq-key was marked inactive"),
        (
            "Upstream reports EXHAUSTED with 0 % left, until its reset at 2026-11-29 17:00:00 UTC",
            "Upstream reported EXHAUSTED with 0 % left, until its reset at 2026-11-29 17:00:00 UTC",
        ),
        (
            "3.0 % left, re-entry needs more than 5 %",
            "3.0 % left, re-entry needed more than 5 %",
        ),
        (
            "The reading is 200 s old, older than the 180 s maximum",
            "The reading was 200 s old, older than the 180 s maximum",
        ),
        (
            "The reading's reset at 2026-11-29 17:00:00 UTC has passed: the window it describes "
            "is over and a refresh is due",
            "The reading's reset at 2026-11-29 17:00:00 UTC had passed: the window it described "
            "was over and a refresh was due",
        ),
        (
            "The cheap rung's budget is 0 USD: the rung is disabled",
            "The cheap rung's budget was 0 USD: the rung was disabled",
        ),
        (
            "No catalog entry covers acme with no auth type: uncurated is treated as metered",
            "No catalog entry covered acme with no auth type: uncurated was treated as metered",
        ),
        ("Moved to the cheap rung", "Moved to the cheap rung"),
        ("Something new (12 s from now)", "Something new"),
    ],
)
def test_a_stored_sentence_reads_as_history(stored: str, past: str) -> None:
    assert past_tense(stored) == past


def test_the_cooldown_sentence_the_core_writes_reads_as_history() -> None:
    cooling = view("plan", cooldown_until=NOW + timedelta(seconds=85))
    cause = connection_cause(cooling, Grouping.SUBSCRIPTION, NOW)

    assert cause is not None
    assert past_tense(cause.detail) == "Was cooling down until 2026-11-29 12:01:25 UTC"
