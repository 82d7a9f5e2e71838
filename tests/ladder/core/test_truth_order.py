"""Which truth wins when two arrive out of order (api.md "Events from the gateway"): the
newer, except that within a minute the less safe one does."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ladder.core import QuotaStatus, Reading, outranks, supersedes
from tests.ladder.core.factories import NOW

SAFE, EXHAUSTED, UNKNOWN = QuotaStatus.SAFE, QuotaStatus.EXHAUSTED, QuotaStatus.UNKNOWN


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def read(status: QuotaStatus, seconds: float, reset_in: float | None = None) -> Reading:
    remaining = 0.0 if status is EXHAUSTED else (None if status is UNKNOWN else 50.0)
    reset = None if reset_in is None else at(reset_in)
    return Reading(status, remaining, reset, at(seconds))


@pytest.mark.parametrize(
    ("new", "current", "expected"),
    [
        # A gateway whose clock runs behind: its exhaustion, 30 s "older" than the SAFE
        # reading the server holds, still wins; one 60 s older is history.
        pytest.param(read(EXHAUSTED, -30), read(SAFE, 0), True, id="exhaustion-30s-behind"),
        pytest.param(read(EXHAUSTED, -59), read(SAFE, 0), True, id="exhaustion-59s-behind"),
        pytest.param(read(EXHAUSTED, -60), read(SAFE, 0), False, id="exhaustion-60s-behind"),
        # A late success's headers: headroom outranks an exhaustion only a minute newer...
        pytest.param(read(SAFE, 30), read(EXHAUSTED, 0), False, id="headroom-30s-after"),
        pytest.param(read(SAFE, 59), read(EXHAUSTED, 0), False, id="headroom-59s-after"),
        pytest.param(read(SAFE, 60), read(EXHAUSTED, 0), True, id="headroom-60s-after"),
        # ...or taken once the exhaustion's own window has reset.
        pytest.param(read(SAFE, 10), read(EXHAUSTED, 0, 10), True, id="headroom-after-reset"),
        pytest.param(read(SAFE, 9), read(EXHAUSTED, 0, 10), False, id="headroom-before-reset"),
        pytest.param(read(EXHAUSTED, -5, -1), read(SAFE, 0), False, id="exhaustion-of-old-window"),
        # An UNKNOWN reading cannot hide an exhaustion either; an exhaustion outranks it.
        pytest.param(read(UNKNOWN, 30), read(EXHAUSTED, 0), False, id="unknown-after-exhaustion"),
        pytest.param(read(EXHAUSTED, -30), read(UNKNOWN, 0), True, id="exhaustion-before-unknown"),
        # Two of a kind: the newer wins, a tie to the one received later.
        pytest.param(read(SAFE, -1), read(SAFE, 0), False, id="older-safe"),
        pytest.param(read(SAFE, 0), read(SAFE, 0), True, id="safe-tie"),
        pytest.param(read(EXHAUSTED, -1), read(EXHAUSTED, 0), False, id="older-exhaustion"),
        pytest.param(read(EXHAUSTED, 1), read(EXHAUSTED, 0), True, id="newer-exhaustion"),
    ],
)
def test_which_reading_is_current(new: Reading, current: Reading, expected: bool) -> None:
    assert supersedes(new, current, received=at(120)) is expected


def test_a_reading_with_none_current_is_current() -> None:
    assert supersedes(read(SAFE, -600), None, received=at(0)) is True


def test_a_current_reading_dated_after_the_receipt_is_replaced_whatever_it_says() -> None:
    assert supersedes(read(SAFE, 0), read(EXHAUSTED, 30), received=at(10)) is True


@pytest.mark.parametrize(
    ("success_at", "cooldown_ends_at", "expected"),
    [
        pytest.param(30, 300, False, id="success-30s-after-the-failure"),
        pytest.param(60, 300, True, id="success-a-minute-after"),
        pytest.param(20, 20, True, id="success-once-the-cooldown-ended"),
        pytest.param(-5, 300, False, id="success-observed-before-the-failure"),
    ],
)
def test_a_success_clears_a_failure_only_when_it_outranks_it(
    success_at: float, cooldown_ends_at: float, expected: bool
) -> None:
    cleared = outranks(at(success_at), True, at(0), False, other_ends=at(cooldown_ends_at))

    assert cleared is expected


def test_a_failure_observed_long_before_a_success_is_stale() -> None:
    assert outranks(at(-61), False, at(0), True) is False
    assert outranks(at(-59), False, at(0), True) is True
