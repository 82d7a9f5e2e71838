"""The simulated providers: the ground truth of each connection's plan windows, which
fill with the requests routed to it and empty at each window boundary."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from ladder import core
from ladder.core import QuotaStatus, Reading, WindowReading
from ladder.core.scopes import scope_matches
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

    def binds(self, model: str | None) -> bool:
        """Whether this window counts and binds requests of `model` (None: any model; an
        unscoped window binds every request, a scoped one only its models')."""
        scope = self.spec.model_scope
        return scope is None or model is None or scope_matches(scope, model)


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
        # The plan's capacity is its longest unscoped window (a per-model cap is a part).
        longest = max(
            (w.spec.length for w in self.windows if w.spec.model_scope is None), default=None
        )
        for window in self.windows:
            if now >= window.end:
                crossed.append((window.end, window.remaining_percent()))
                if window.spec.model_scope is None and window.spec.length == longest:
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

    def has_headroom(self, model: str | None = None) -> bool:
        """Whether no window binding `model` is full (None: no window at all)."""
        return not any(window.is_full() for window in self.windows if window.binds(model))

    def is_above(self, percent: float, model: str | None = None) -> bool:
        """Whether every window binding `model` holds more than `percent` of its size."""
        return all(
            window.remaining_percent() > percent for window in self.windows if window.binds(model)
        )

    def serves_again_at(self, model: str | None = None) -> datetime | None:
        """When every full window binding `model` has restarted (the 429's reset instant)."""
        return max((w.end for w in self.windows if w.is_full() and w.binds(model)), default=None)

    def full_scope(self, model: str) -> str | None:
        """The model scope whose cap alone refuses `model` (every full window binding it is
        scoped, all of one scope), else None: the refusal binds the whole connection."""
        scopes = {w.spec.model_scope for w in self.windows if w.is_full() and w.binds(model)}
        if len(scopes) == 1 and None not in scopes:
            return scopes.pop()
        return None

    def consume(self, request: Request, model: str | None = None) -> None:
        """Count a request of `model` in every window binding it."""
        for window in self.windows:
            if window.binds(model):
                window.used += window.spec.units(request)

    def windows_now(self) -> tuple[WindowReading, ...]:
        """Every window as a usage endpoint reports it, scoped windows with their scope."""
        return tuple(
            WindowReading(w.spec.name, w.remaining_percent(), w.end, w.spec.model_scope)
            for w in self.windows
        )

    def reading(self, now: datetime, *, single_window: bool = False) -> Reading:
        """What a usage endpoint says now, reduced as the shell reduces an adapter's
        windows (`services.normalise_reading`): the binding unscoped window, its derived
        status. `single_window`: every window binds the whole connection (the rule before
        windows scoped to a model, kept for the comparison)."""
        windows = self.windows_now()
        if single_window:
            windows = tuple(replace(w, model_scope=None) for w in windows)
        if not any(w.model_scope is None for w in windows):
            return Reading(QuotaStatus.SAFE, 100.0, None, now)
        remaining, reset_at = core.binding_window(windows)
        return Reading(core.derive_status(remaining), remaining, reset_at, now)
