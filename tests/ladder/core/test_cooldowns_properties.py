"""Properties of cooldowns over any drawn event (hypothesis)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from ladder.core import LadderConfig, apply_event, clamp_cooldown_to_reset
from tests.ladder.core.strategies import BASE, PROPERTY_SETTINGS, configs, offsets


@PROPERTY_SETTINGS
@given(
    cooldown=offsets,
    reset=st.one_of(st.none(), offsets),
)
def test_the_clamp_never_lengthens_and_never_lands_in_the_past(
    cooldown: timedelta, reset: timedelta | None
) -> None:
    cooldown_until = BASE + cooldown
    reset_at = None if reset is None else BASE + reset

    clamped = clamp_cooldown_to_reset(cooldown_until, reset_at, BASE)

    assert clamped <= cooldown_until
    assert clamped == cooldown_until or clamped > BASE


@PROPERTY_SETTINGS
@given(
    kind=st.sampled_from(("rate_limited", "quota_exhausted", "error")),
    failures=st.integers(0, 50),
    retry_after=st.one_of(st.none(), st.floats(0, 86400)),
    reset=st.one_of(st.none(), offsets),
    config=configs,
)
def test_a_failure_always_counts_and_its_cooldown_matches_its_seconds(
    kind: str,
    failures: int,
    retry_after: float | None,
    reset: timedelta | None,
    config: LadderConfig,
) -> None:
    change = apply_event(
        kind,
        consecutive_failures=failures,
        retry_after_seconds=retry_after,
        reset_at=None if reset is None else BASE + reset,
        config=config,
        now=BASE,
    )

    assert change.consecutive_failures == failures + 1
    assert change.cooldown_until is not None
    assert change.cooldown_seconds == (change.cooldown_until - BASE).total_seconds()
    assert change.cooldown_seconds >= 0
    if retry_after is None and not change.clamped_to_reset:
        assert change.cooldown_seconds <= config.max_cooldown_seconds + 1e-6
