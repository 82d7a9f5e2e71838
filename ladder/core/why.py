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


# A stored sentence says what held when it was written, in the present tense and, for a
# cooldown, how far off its end was then ("(85 s from now)"): true then, false on any
# later reading. `past_tense` says it again as history: the distance dropped (the
# absolute instant stays), the verbs moved to the past.
_RELATIVE: Final = re.compile(r" \(\d+ s from now\)")
_ENTERED: Final = re.compile(r"^In the pool on the (\w+) rung$")
_PAST: Final[tuple[tuple[str, str], ...]] = (
    ("Cooling down until", "Was cooling down until"),
    (": cooling down until", ": was cooling down until"),
    (" is marked inactive", " was marked inactive"),
    ("Overage is ", "Overage was "),
    ("Live evidence says it can bill", "Live evidence said it could bill"),
    ("; the catalog says ", "; the catalog said "),
    ("The no-auth path is keyless", "The no-auth path was keyless"),
    ("Billing is metered", "Billing was metered"),
    ("No catalog entry covers ", "No catalog entry covered "),
    ("uncurated is treated as metered", "uncurated was treated as metered"),
    ("Upstream reports EXHAUSTED", "Upstream reported EXHAUSTED"),
    ("re-entry needs more than", "re-entry needed more than"),
    ("its quota is unknown", "its quota was unknown"),
    (
        " has passed: the window it describes is over and a refresh is due",
        " had passed: the window it described was over and a refresh was due",
    ),
    ("The reading is ", "The reading was "),
    (
        "The reading does not say how much quota is left",
        "The reading did not say how much quota was left",
    ),
    ("The reading's status is UNKNOWN", "The reading's status was UNKNOWN"),
    ("budget is 0 USD: the rung is disabled", "budget was 0 USD: the rung was disabled"),
)


def past_tense(detail: str) -> str:
    """A stored "why" sentence as history: no distance from the moment it was written
    ("85 s from now"), its verbs in the past ("Was cooling down until 2026-11-29
    12:01:25 UTC"); a sentence it does not know keeps its words, distances dropped."""
    text = _RELATIVE.sub("", detail)
    entered = _ENTERED.fullmatch(text)
    if entered:
        return f"Entered on the {entered.group(1)} rung"
    for present, past in _PAST:
        text = text.replace(present, past)
    return text
