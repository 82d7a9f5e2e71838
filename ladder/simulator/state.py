"""The product's state of each connection in one run, kept as the shell keeps it:
readings from the poller's timing, hysteresis, model scopes, billing evidence, cooldowns
from the gateway's events, and the providers' ground truth they are read from."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Final

from ladder import core
from ladder.core import ConnectionView, Hysteresis, Reading, Rung, WindowReading
from ladder.core.scopes import cooled_scope, scoped_after
from ladder.core.types import OverageEvidence, OverageSays, ScopedQuota
from ladder.simulator.providers import Provider
from ladder.simulator.results import Observer, Outcome, Policy, Step
from ladder.simulator.trace import Trace
from ladder.simulator.world import Timing, World

_ZERO: Final = Decimal(0)


@dataclass(slots=True)
class PendingReset:
    """A plan back after a reset, and the last request a paid rung served since."""

    at: datetime
    last_paid_at: datetime | None = None


@dataclass(slots=True)
class Tally:
    """What a run counts as it goes (frozen into a `PolicyResult` at the end)."""

    outcomes: list[Outcome] = field(default_factory=list)
    spend: Decimal = _ZERO
    refused: int = 0
    paid_requests: int = 0
    paid_with_headroom: int = 0
    paid_in_band: int = 0
    failed_attempts: int = 0
    flips: int = 0
    lags: list[float] = field(default_factory=list)
    by_rung: list[int] = field(default_factory=lambda: [0] * len(Rung))
    expired_unused: float = 0.0
    turns: int = 0
    switches: int = 0
    overage: Decimal = _ZERO
    overage_requests: int = 0


class ConnectionState:
    """The connections of one run: what the product knows of each, and the providers'
    ground truth. Mutable state, but no IO and no clock."""

    def __init__(
        self,
        world: World,
        policy: Policy,
        timing: Timing,
        trace: Trace,
        observer: Observer | None,
        *,
        single_window: bool,
        heed_evidence: bool,
    ) -> None:
        self.world = world
        # `single_window`: every window binds the whole connection, as before windows
        # scoped to a model; `heed_evidence`: a plan's "can meter" evidence reaches the
        # views (False: the catalog alone, as before billing evidence from the wire).
        self.single_window = single_window
        self.heed_evidence = heed_evidence
        self.observer = observer
        self.policy = policy
        self.timing = timing
        self.config = world.config
        self.origin = trace.start
        self.connections = world.connection_map()
        self.providers = {
            cid: Provider(connection, trace.start) for cid, connection in self.connections.items()
        }
        self.next_boundary = min(
            (p.next_boundary for p in self.providers.values() if p.next_boundary is not None),
            default=None,
        )
        self.is_original = policy == Policy.ORIGINAL_DESIGN
        # This product stores readings from polls and 429s; the cost sort reads none.
        self.uses_poller = policy in (Policy.THRIFTY, Policy.SUBSCRIPTION_ONLY)
        self.cooldown: dict[str, datetime | None] = dict.fromkeys(self.connections)
        self.failures: dict[str, int] = dict.fromkeys(self.connections, 0)
        self.reading: dict[str, Reading | None] = dict.fromkeys(self.connections)
        self.hysteresis: dict[str, Hysteresis] = dict.fromkeys(self.connections, core.NEVER_READ)
        self.scoped: dict[str, tuple[ScopedQuota, ...]] = dict.fromkeys(self.connections, ())
        self.evidence: dict[str, OverageEvidence | None] = dict.fromkeys(self.connections)
        self.cache_at: dict[str, datetime | None] = dict.fromkeys(self.connections)
        self.views: dict[str, ConnectionView] = {}
        for cid in self.connections:
            self._refresh_view(cid)
        self.events: list[tuple[datetime, int, str, str]] = []
        self.sequence = 0
        self.due_age = timing.due_age(self.config)
        self.beat = timedelta(seconds=timing.beat_seconds)
        self.grace = timedelta(seconds=timing.reset_grace_seconds)
        self.cache_ttl = timedelta(seconds=timing.original_cache_ttl_seconds)
        if self.uses_poller:
            for cid, connection in self.connections.items():
                if connection.is_polled and connection.is_active:
                    self._push(trace.start, "due", cid)
        self.pending: dict[str, list[PendingReset]] = {}
        self.tally = Tally()

    def _refresh_view(self, cid: str) -> None:
        connection = self.connections[cid]
        self.views[cid] = ConnectionView(
            connection_id=cid,
            provider=connection.provider,
            auth_type=connection.auth_type,
            billing=connection.billing,
            is_active=connection.is_active,
            cooldown_until=self.cooldown[cid],
            reading=self.reading[cid],
            # The original design left hysteresis unwired: always in play.
            hysteresis=core.NEVER_READ if self.is_original else self.hysteresis[cid],
            evidence=self.evidence[cid],
            scoped=self.scoped[cid],
        )

    def _push(self, at: datetime, kind: str, cid: str) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at, self.sequence, kind, cid))

    def _beat_ceil(self, at: datetime) -> datetime:
        ticks = -(-(at - self.origin) // self.beat)  # ceiling division of timedeltas
        return self.origin + self.beat * ticks

    def _store_reading(
        self,
        cid: str,
        reading: Reading,
        now: datetime,
        *,
        observed: bool = True,
        windows: tuple[WindowReading, ...] = (),
    ) -> None:
        """What `services.store_reading` does with a reading, through the same core
        rules: the checked_at cap, which reading is current, hysteresis, and whether the
        reading's reset instant earns a refresh of its own."""
        reading = replace(reading, checked_at=core.stored_checked_at(reading.checked_at, now))
        if observed and self.observer is not None:
            self.observer(Step(now, cid, reading=reading))
        current = self.reading[cid]
        if not core.supersedes(reading, current, now):
            return  # kept as history by the shell; the state does not change
        self.reading[cid] = reading
        self.hysteresis[cid] = core.hysteresis_after(self.hysteresis[cid], reading, self.config)
        if not self.single_window:
            self.scoped[cid] = scoped_after(
                self.scoped[cid], windows, reading.checked_at, self.config, now
            )
        self._refresh_view(cid)
        if not self.connections[cid].is_polled:
            return
        # The beat's scan runs at the first tick where the reading is due by age. Its
        # other clause (a passed reset) is left to the reset-time refresh below, which
        # answers every reset within its horizon first: ticks aligned with the plans'
        # window grid would otherwise poll at the very reset instant, earlier than a
        # real beat of unknown phase would.
        self._push(self._beat_ceil(reading.checked_at + self.due_age), "due", cid)
        if core.should_schedule_reset_refresh(
            reading.reset_at,
            current.reset_at if current is not None else None,
            current.checked_at if current is not None else None,
            now,
        ):
            assert reading.reset_at is not None
            # `tasks.schedule_refresh_at`: a refresh requested at the reset, run after grace.
            self._push(reading.reset_at + self.grace, "reset", cid)

    def _poll(self, cid: str, now: datetime) -> None:
        provider = self.providers[cid]
        if self.heed_evidence and provider.connection.can_meter:
            # The usage endpoint says the account can bill past its plan (newest evidence).
            self.evidence[cid] = OverageEvidence(
                OverageSays.CAN_METER, "the usage says extra_usage.is_enabled: true", "usage", now
            )
        reading = provider.reading(now, single_window=self.single_window)
        self._store_reading(cid, reading, now, windows=provider.windows_now())

    def _advance(self, now: datetime) -> None:
        """Run every poll due up to `now` and roll the providers' windows to `now`."""
        events = self.events
        while events and events[0][0] <= now:
            at, _, kind, cid = heapq.heappop(events)
            self._roll(at)
            latest = self.reading[cid]
            if kind == "due":
                # The beat's due scan at this tick; a newer reading may have answered it.
                if self.connections[cid].is_active and core.is_reading_due(
                    latest.checked_at if latest is not None else None,
                    latest.reset_at if latest is not None else None,
                    at,
                    self.due_age,
                ):
                    self._poll(cid, at)
            elif not core.answers_refresh(
                latest.checked_at if latest is not None else None, at - self.grace, at
            ):
                # The reset-time refresh task, idempotent: a reading since the reset answers it.
                self._poll(cid, at)
        self._roll(now)
        if self.is_original:
            for cid, connection in self.connections.items():
                if not connection.is_polled:
                    continue
                filled = self.cache_at[cid]
                if filled is None or now - filled >= self.cache_ttl:
                    # The original cache: a snapshot trusted until its TTL expires, with
                    # no reset instant, so a reset goes unnoticed until the next refill.
                    truth = self.providers[cid].reading(now)
                    self.cache_at[cid] = now
                    self.reading[cid] = Reading(truth.status, truth.remaining_percent, None, now)
                    self._refresh_view(cid)

    def _roll(self, now: datetime) -> None:
        if self.next_boundary is None or now < self.next_boundary:
            return
        cutoff = self.config.exit_cutoff_percent
        floor = self.config.reentry_floor
        for cid, provider in self.providers.items():
            crossed = provider.roll(now)
            if not crossed or not provider.connection.is_plan:
                continue
            self.tally.expired_unused += provider.expired_share_of_longest
            # Only a plan back above the re-entry floor in every window counts: one left
            # inside the hysteresis band (say a weekly window at 4 %) is not back.
            if provider.is_above(floor):
                for boundary, remaining_before in crossed:
                    # A plan that ran down to the exit cutoff and is back: from here on,
                    # traffic it could serve should return to it.
                    if remaining_before <= cutoff:
                        self.pending.setdefault(cid, []).append(PendingReset(boundary))
        self.next_boundary = min(
            (p.next_boundary for p in self.providers.values() if p.next_boundary is not None),
            default=None,
        )

    def _refused_in_scope(
        self, cid: str, scope: str, reset_at: datetime | None, now: datetime
    ) -> None:
        """A 429 from a model-scoped cap alone (the `7d_oi` headers): it cools only
        (connection, that scope); the connection's own state is untouched."""
        self.tally.failed_attempts += 1
        change = core.apply_event(
            core.EventKind.QUOTA_EXHAUSTED,
            consecutive_failures=0,
            retry_after_seconds=None,
            reset_at=reset_at,
            config=self.config,
            now=now,
        )
        self.scoped[cid] = cooled_scope(self.scoped[cid], scope, change.cooldown_until)
        self._refresh_view(cid)

    def _refused_by_upstream(self, cid: str, reset_at: datetime | None, now: datetime) -> None:
        """A 429 with the instant the plan serves again: the gateway's event, then the
        gateway falls through to the next connection of the pool."""
        self.tally.failed_attempts += 1
        if self.observer is not None:
            self.observer(Step(now, cid, event=core.EventKind.QUOTA_EXHAUSTED, reset_at=reset_at))
        change = core.apply_event(
            core.EventKind.QUOTA_EXHAUSTED,
            consecutive_failures=self.failures[cid],
            retry_after_seconds=None,
            # The original design left the clamp unwired: it never saw the reset instant.
            reset_at=None if self.is_original else reset_at,
            config=self.config,
            now=now,
        )
        self.cooldown[cid] = change.cooldown_until
        self.failures[cid] = change.consecutive_failures
        if self.uses_poller:
            # The event's own reading (`services.apply_event` stores it), not a poll.
            self._store_reading(cid, core.exhausted_reading(reset_at, now), now, observed=False)
        else:
            self._refresh_view(cid)


def lag_of(pending: PendingReset) -> float:
    """Seconds from the reset to the last request a paid rung served that the plan could
    have taken, before the plan served again; 0 when paid rungs served none."""
    if pending.last_paid_at is None:
        return 0.0
    return (pending.last_paid_at - pending.at).total_seconds()
