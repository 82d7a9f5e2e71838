"""Plan utilisation, pure: for each plan connection, how much of each quota window it
used before the window reset and how much it left unused, from the lowest remaining
percent its readings showed in that window (the shell groups the readings in SQL). The
figure a subscription-first operator most wants: quota paid for and never used."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class WindowUse:
    """One quota window of a connection that reset: the lowest remaining percent its
    readings showed before the reset, and how many readings showed it."""

    connection_id: str
    reset_at: datetime
    lowest_remaining_percent: float
    readings: int

    @property
    def used_percent(self) -> float:
        """The share of the window's quota used (as far as the readings saw)."""
        return 100.0 - self.lowest_remaining_percent


@dataclass(frozen=True, slots=True)
class PlanUse:
    """A plan connection's windows that reset in a period, oldest first."""

    connection_id: str
    windows: tuple[WindowUse, ...]

    @property
    def resets(self) -> int:
        """How many of its windows reset in the period."""
        return len(self.windows)

    @property
    def mean_used_percent(self) -> float:
        """The average share used per window."""
        return sum(w.used_percent for w in self.windows) / len(self.windows)

    @property
    def mean_left_percent(self) -> float:
        """The average share left unused at each reset."""
        return sum(w.lowest_remaining_percent for w in self.windows) / len(self.windows)

    @property
    def unused_windows(self) -> float:
        """Whole windows' worth of quota left unused in the period (the left shares
        summed: two windows each reset with half left are one window unused)."""
        return sum(w.lowest_remaining_percent for w in self.windows) / 100.0

    @property
    def last(self) -> WindowUse:
        """The most recent reset."""
        return self.windows[-1]


def plan_uses(windows: Iterable[WindowUse]) -> list[PlanUse]:
    """The windows grouped by connection (by connection id; each one's windows in reset
    order), connections in id order."""
    grouped: dict[str, list[WindowUse]] = {}
    for window in windows:
        grouped.setdefault(window.connection_id, []).append(window)
    return [
        PlanUse(connection_id, tuple(sorted(found, key=lambda w: w.reset_at)))
        for connection_id, found in sorted(grouped.items())
    ]
