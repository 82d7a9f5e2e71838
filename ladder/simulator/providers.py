"""The simulated providers: the ground truth of each connection's plan windows, which
fill with the requests routed to it and empty at each window boundary."""

from __future__ import annotations

from datetime import datetime

from ladder import core
from ladder.core import QuotaStatus, Reading, WindowReading
from ladder.simulator.trace import Request
from ladder.simulator.world import PlanWindow, SimConnection


class _WindowState:
    __slots__ = ("end", "spec", "start", "used")

    def __init__(self, spec: PlanWindow, now: datetime) -> None:
        self.spec = spec
        self.used = 0
        self.start = _window_start(spec, now)
        self.end = self.start + spec.length

    def remaining_percent(self) -> float:
        return max(0.0, 100.0 * (1.0 - self.used / self.spec.size))

    def is_full(self) -> bool:
        return self.used >= self.spec.size


def _window_start(spec: PlanWindow, now: datetime) -> datetime:
    periods = (now - spec.anchor) // spec.length  # floors, also before the anchor
    return spec.anchor + spec.length * periods


class Provider:
    """The ground truth of one connection: its windows and what they hold."""

    __slots__ = ("_expired", "connection", "next_boundary", "windows")

    def __init__(self, connection: SimConnection, now: datetime) -> None:
        self.connection = connection
        self.windows = [_WindowState(spec, now) for spec in connection.windows]
        self.next_boundary = min((w.end for w in self.windows), default=None)
        self._expired = 0.0

    def roll(self, now: datetime) -> list[tuple[datetime, float]]:
        """Advance to `now`; (boundary, remaining % just before it) of each window that
        restarted."""
        if self.next_boundary is None or now < self.next_boundary:
            return []
        crossed = []
        self._expired = 0.0
        longest = max(w.spec.length for w in self.windows)
        for window in self.windows:
            if now >= window.end:
                crossed.append((window.end, window.remaining_percent()))
                if window.spec.length == longest:
                    self._expired += window.remaining_percent() / 100.0
                window.used = 0
                window.start = _window_start(window.spec, now)
                window.end = window.start + window.spec.length
        self.next_boundary = min(w.end for w in self.windows)
        return crossed

    @property
    def expired_share_of_longest(self) -> float:
        """Set by `roll`: the share of the longest window left when it last restarted
        (0 when it did not restart in that roll)."""
        return self._expired

    def has_headroom(self) -> bool:
        return not any(window.is_full() for window in self.windows)

    def is_above(self, percent: float) -> bool:
        """Whether every window holds more than `percent` of its size."""
        return all(window.remaining_percent() > percent for window in self.windows)

    def serves_again_at(self) -> datetime | None:
        """When every full window has restarted (the 429's reset instant)."""
        return max((w.end for w in self.windows if w.is_full()), default=None)

    def consume(self, request: Request) -> None:
        for window in self.windows:
            window.used += window.spec.units(request)

    def reading(self, now: datetime) -> Reading:
        """What a usage endpoint says now, reduced as the shell reduces an adapter's
        windows (`services.normalise_reading`): the binding window, its derived status."""
        if not self.windows:
            return Reading(QuotaStatus.SAFE, 100.0, None, now)
        remaining, reset_at = core.binding_window(
            WindowReading(w.spec.name, w.remaining_percent(), w.end) for w in self.windows
        )
        return Reading(core.derive_status(remaining), remaining, reset_at, now)
