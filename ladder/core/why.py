"""Stored "why" sentences, presented again under the current settings.

A hysteresis flip stores its sentence when it happens ("1.0 % left, at or below the
exit cutoff of 5 %"). The settings may change afterwards; a page that shows the stored
sentence as is would then say "floor of 5 %" under a header saying 30 %. This module
reads the numbers back out of the sentences the core writes (ladder/core/quota.py
`hysteresis_after`) and says them again: what held then, what holds now, formatted for
people (ladder/core/prose.py). A sentence it does not recognise is returned with its
raw decimals rounded, never dropped. Pure: no ORM, no clock."""

from __future__ import annotations

import re
from typing import Final

from ladder.core.prose import number_text, percent_text
from ladder.core.types import HysteresisState, LadderConfig

_NUMBER: Final = r"(\d+(?:\.\d+)?(?:e-?\d+)?)"
_EXHAUSTED: Final = re.compile(
    rf"Upstream reported EXHAUSTED(?:, {_NUMBER} % left)?; re-entry needs more than {_NUMBER} %"
)
_AT_CUTOFF: Final = re.compile(rf"{_NUMBER} % left, at or below the exit cutoff of {_NUMBER} %")
_ABOVE_FLOOR: Final = re.compile(rf"{_NUMBER} % left, above the re-entry floor of {_NUMBER} %")
_RAW_PERCENT: Final = re.compile(r"\d+\.\d{2,}(?= %)")


def _threshold(then: str, now: float) -> str:
    """ "5 %" when unchanged; "5 % then, 30 % now" when the settings moved since."""
    if float(then) == float(now):
        return f"{number_text(float(then))} %"
    return f"{number_text(float(then))} % then, {number_text(now)} % now"


def hysteresis_why(
    state: HysteresisState | str, reason: str, config: LadderConfig, *, is_current: bool
) -> str:
    """The sentence of a hysteresis flip under the current settings. `is_current`: the
    connection's present state (a dropped-out one then also says what re-entry needs
    now); False for a row of history (what held then, and what holds now when it moved).
    """
    floor = config.reentry_floor
    cutoff = config.exit_cutoff_percent
    dropped = HysteresisState(state) == HysteresisState.DROPPED_OUT
    needs = f"re-entry needs more than {number_text(floor)} %"
    if match := _EXHAUSTED.fullmatch(reason):
        left, floor_then = match.groups()
        with_left = "" if left is None else f" with {percent_text(float(left))} % left"
        if float(floor_then) == float(floor) or is_current:
            return f"Upstream reported EXHAUSTED{with_left}; {needs}"
        return (
            f"Upstream reported EXHAUSTED{with_left}; re-entry needed more than "
            f"{_threshold(floor_then, floor)}"
        )
    if match := _AT_CUTOFF.fullmatch(reason):
        left, cutoff_then = match.groups()
        text = (
            f"{percent_text(float(left), beside=float(cutoff_then))} % left, at or below "
            f"the exit cutoff of {_threshold(cutoff_then, cutoff)}"
        )
        return f"{text}; {needs}" if dropped and is_current else text
    if match := _ABOVE_FLOOR.fullmatch(reason):
        left, floor_then = match.groups()
        text = (
            f"{percent_text(float(left), beside=float(floor_then))} % left, above the "
            f"re-entry floor of {_threshold(floor_then, floor)}"
        )
        return text
    rounded = _RAW_PERCENT.sub(lambda m: percent_text(float(m.group())), reason)
    return (
        f"{rounded}; {needs}" if dropped and is_current and "re-entry" not in rounded else rounded
    )
