"""One policy over one trace on a simulated clock, calling the pure core as the shell
does: decide, apply_event, hysteresis_after and the polling rules."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Final

from billing.tiers import Tier
from ladder import core
from ladder.core import (
    CandidateIn,
    ConnectionView,
    Hysteresis,
    Reading,
    Rung,
    RungSpend,
)
from ladder.simulator.providers import Provider
from ladder.simulator.results import (
    ALL_POLICIES,
    Observer,
    Outcome,
    Policy,
    PolicyResult,
    ProgressCallback,
    Step,
)
from ladder.simulator.trace import Request, Selection, Trace
from ladder.simulator.world import Timing, World

PAID_RUNGS: Final = (Rung.CHEAP, Rung.PREMIUM)
_ZERO: Final = Decimal(0)

# --------------------------------------------------------------------------- one run


@dataclass(slots=True)
class _PendingReset:
    at: datetime
    last_paid_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class _Route:
    """Per selection: its candidates, the plan connections it can reach, and every
    (candidate, connection) pair in the scorer's order (for the cost sort)."""

    candidates: tuple[CandidateIn, ...]
    reachable_plans: tuple[str, ...]
    pairs: tuple[tuple[CandidateIn, str], ...]


@dataclass(slots=True)
class _Tally:
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


class _Run:
    """One policy over one trace. Mutable state, but no IO and no clock."""

    def __init__(
        self,
        world: World,
        policy: Policy,
        timing: Timing,
        trace: Trace,
        observer: Observer | None = None,
        *,
        given_order: bool = False,
        sticky: bool = False,
    ) -> None:
        self.world = world
        # `given_order`: the plan connections of an entry in the allowlist's own order, as
        # before "Which plan connection first" (the comparison's baseline). `sticky`: the
        # gateway keeps a conversation on its last connection while its entry lists it
        # (omniroute_client.sticky).
        self.given_order = given_order
        self.sticky = sticky
        self.last_connection: dict[int, tuple[Rung, str]] = {}
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
        self.auto_id = (
            core.SUBSCRIPTION_AUTO_ID
            if policy == Policy.SUBSCRIPTION_ONLY
            else core.THRIFTY_AUTO_ID
        )
        self.cooldown: dict[str, datetime | None] = dict.fromkeys(self.connections)
        self.failures: dict[str, int] = dict.fromkeys(self.connections, 0)
        self.reading: dict[str, Reading | None] = dict.fromkeys(self.connections)
        self.hysteresis: dict[str, Hysteresis] = dict.fromkeys(self.connections, core.NEVER_READ)
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
        self.tiers: dict[tuple[str, str], Tier] = {
            (c.provider, c.model): world.prices.tier_of(
                c.provider, c.model, self.config.cheap_max_input_usd_per_mtok
            )
            for c in world.candidates
        }
        self.routes: dict[Selection, _Route] = {}
        self.spend_by_window: dict[tuple[Rung, datetime], Decimal] = {}
        self.budget_bounds: tuple[datetime, datetime] | None = None
        self.pending: dict[str, list[_PendingReset]] = {}
        self.last_rung: dict[Selection, Rung] = {}
        self.tally = _Tally()

    # ---------------------------------------------------------------- connection state

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
        )

    def _push(self, at: datetime, kind: str, cid: str) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at, self.sequence, kind, cid))

    def _beat_ceil(self, at: datetime) -> datetime:
        ticks = -(-(at - self.origin) // self.beat)  # ceiling division of timedeltas
        return self.origin + self.beat * ticks

    def _store_reading(
        self, cid: str, reading: Reading, now: datetime, *, observed: bool = True
    ) -> None:
        """What `services.store_reading` does with a reading, through the same core
        rules: the checked_at cap, which reading is current, hysteresis, and whether the
        reading's reset instant earns a refresh of its own."""
        reading = replace(reading, checked_at=core.stored_checked_at(reading.checked_at, now))
        if observed and self.observer is not None:
            self.observer(Step(now, cid, reading=reading))
        current = self.reading[cid]
        if not core.supersedes(
            reading.checked_at, current.checked_at if current is not None else None, now
        ):
            return  # kept as history by the shell; the state does not change
        self.reading[cid] = reading
        self.hysteresis[cid] = core.hysteresis_after(self.hysteresis[cid], reading, self.config)
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
        self._store_reading(cid, self.providers[cid].reading(now), now)

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
                        self.pending.setdefault(cid, []).append(_PendingReset(boundary))
        self.next_boundary = min(
            (p.next_boundary for p in self.providers.values() if p.next_boundary is not None),
            default=None,
        )

    # ---------------------------------------------------------------- routing

    def _route_for(self, selection: Selection) -> _Route:
        route = self.routes.get(selection)
        if route is None:
            matching = tuple(c for c in self.world.candidates if selection.matches(c))
            pairs = tuple((c, cid) for c in matching for cid in c.connection_ids)
            plans = tuple(
                dict.fromkeys(
                    cid
                    for _, cid in pairs
                    if self.connections[cid].is_plan and self.connections[cid].is_active
                )
            )
            # The candidates are filtered here for every kind of selection, so the core
            # decides over them with the flat id (a category filter there is the same).
            route = _Route(
                candidates=matching,
                reachable_plans=plans,
                pairs=pairs,
            )
            self.routes[selection] = route
        return route

    def _budget_window(self, now: datetime) -> tuple[datetime, datetime]:
        bounds = self.budget_bounds
        if bounds is None or not bounds[0] <= now < bounds[1]:
            bounds = core.budget_window_bounds(self.config.budget_window, now)
            self.budget_bounds = bounds
        return bounds

    def _spend_now(self, now: datetime) -> dict[Rung, RungSpend]:
        start, end = self._budget_window(now)
        return {
            rung: RungSpend(self.spend_by_window.get((rung, start), _ZERO), end)
            for rung in PAID_RUNGS
        }

    def handle(self, request: Request) -> None:
        """Replay one request at its instant."""
        now = request.at
        self._advance(now)
        route = self._route_for(request.selection)
        if self.policy == Policy.CHEAPEST_FIRST:
            attempts = self._cheapest_order(route, request)
        else:
            decision = core.decide(
                self.auto_id,
                route.candidates,
                self.views,
                self.tiers,
                self._spend_now(now),
                self.config,
                now,
            )
            if self.observer is not None:
                self.observer(Step(now, decision=decision))
            attempts = [
                (entry.provider, entry.model, entry.rung, cid)
                for entry in decision.candidates
                for cid in self._connection_order(entry, route, request)
            ]
        tried: set[str] = set()
        for provider, model, rung, cid in attempts:
            if cid in tried:
                continue
            tried.add(cid)
            if self._attempt(cid, provider, model, rung, request, route):
                return
        self.tally.refused += 1
        self.tally.outcomes.append(Outcome(now, None, None, _ZERO))

    def _connection_order(
        self, entry: core.DecidedCandidate, route: _Route, request: Request
    ) -> tuple[str, ...]:
        """An entry's connections in the order the gateway tries them."""
        ids = entry.connection_ids
        if self.given_order and len(ids) > 1:
            given = next(c.connection_ids for c in route.candidates if c.id == entry.id)
            ids = tuple(cid for cid in given if cid in ids)
        last = (
            None if request.conversation is None else self.last_connection.get(request.conversation)
        )
        if self.sticky and last is not None and last[0] == entry.rung and last[1] in ids:
            ids = (last[1], *(cid for cid in ids if cid != last[1]))
        return ids

    def _cheapest_order(self, route: _Route, request: Request) -> list[tuple[str, str, Rung, str]]:
        now = request.at
        priced = []
        for order, (candidate, cid) in enumerate(route.pairs):
            connection = self.connections[cid]
            cooldown = self.cooldown[cid]
            if not connection.is_active or (cooldown is not None and cooldown > now):
                continue
            # Deliberately blind to billing: a plan login is priced like a metered key.
            cost = self.world.prices.cost_usd(
                candidate.provider, candidate.model, request.input_tokens, request.output_tokens
            )
            rung = core.rung_for(
                connection.billing, self.tiers[(candidate.provider, candidate.model)]
            )
            priced.append((cost, order, candidate.provider, candidate.model, rung, cid))
        priced.sort(key=lambda item: (item[0], item[1]))
        return [(provider, model, rung, cid) for _, _, provider, model, rung, cid in priced]

    def _attempt(
        self, cid: str, provider: str, model: str, rung: Rung, request: Request, route: _Route
    ) -> bool:
        now = request.at
        connection = self.connections[cid]
        upstream = self.providers[cid]
        has_headroom = upstream.has_headroom()
        if not has_headroom and not connection.bills_past_plan:
            self._refused_by_upstream(cid, upstream.serves_again_at(), now)
            return False
        cost = _ZERO
        if connection.is_billed or not has_headroom:
            # Metered keys bill every request; a plan past its windows bills its overage.
            cost = self.world.prices.cost_usd(
                provider, model, request.input_tokens, request.output_tokens
            )
        upstream.consume(request)
        if self.failures[cid] or self.cooldown[cid] is not None:
            if self.observer is not None:
                self.observer(Step(now, cid, event=core.EventKind.SUCCESS))
            change = core.apply_event(
                core.EventKind.SUCCESS,
                consecutive_failures=self.failures[cid],
                retry_after_seconds=None,
                reset_at=None,
                config=self.config,
                now=now,
            )
            self.cooldown[cid] = change.cooldown_until
            self.failures[cid] = change.consecutive_failures
            self._refresh_view(cid)
        self._account(cid, rung, cost, request, route)
        return True

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

    def _account(
        self, cid: str, rung: Rung, cost: Decimal, request: Request, route: _Route
    ) -> None:
        now = request.at
        tally = self.tally
        tally.spend += cost
        tally.by_rung[rung] += 1
        tally.outcomes.append(Outcome(now, rung, cid, cost))
        if rung.is_budget_gated:
            key = (rung, self._budget_window(now)[0])
            self.spend_by_window[key] = self.spend_by_window.get(key, _ZERO) + cost
            tally.paid_requests += 1
            # Headroom is ground truth, not a reading. Above the re-entry floor in every
            # window a plan is usable whatever its hysteresis state; between the exit
            # cutoff and the floor it is inside the band, which a dropped-out plan
            # deliberately leaves unused; at or below the cutoff nothing counts.
            plans = [self.providers[plan] for plan in route.reachable_plans]
            if any(plan.is_above(self.config.reentry_floor) for plan in plans):
                tally.paid_with_headroom += 1
            elif any(plan.is_above(self.config.exit_cutoff_percent) for plan in plans):
                tally.paid_in_band += 1
            for plan in route.reachable_plans:
                for pending in self.pending.get(plan, ()):
                    pending.last_paid_at = now
        if self.connections[cid].is_plan:
            for pending in self.pending.pop(cid, ()):
                tally.lags.append(_lag(pending))
        conversation = request.conversation
        if conversation is not None:
            last = self.last_connection.get(conversation)
            if last is not None:
                tally.turns += 1
                tally.switches += last[1] != cid
            self.last_connection[conversation] = (rung, cid)
        previous = self.last_rung.get(request.selection)
        if previous is not None and previous != rung:
            tally.flips += 1
        self.last_rung[request.selection] = rung

    def finish(self, hours: float) -> PolicyResult:
        """Close the open reset stretches and freeze the tally."""
        tally = self.tally
        for pendings in self.pending.values():
            tally.lags.extend(_lag(pending) for pending in pendings)
        self.pending.clear()
        return PolicyResult(
            policy=self.policy,
            hours=hours,
            outcomes=tuple(tally.outcomes),
            spend_usd=tally.spend,
            refused=tally.refused,
            paid_requests=tally.paid_requests,
            paid_while_plan_had_headroom=tally.paid_with_headroom,
            paid_while_plan_in_band=tally.paid_in_band,
            failed_attempts=tally.failed_attempts,
            rung_flips=tally.flips,
            paid_seconds_after_resets=tuple(tally.lags),
            served_by_rung=tuple(tally.by_rung),
            plan_windows_expired_unused=tally.expired_unused,
            conversation_turns=tally.turns,
            conversation_switches=tally.switches,
        )


def _lag(pending: _PendingReset) -> float:
    # Seconds from the reset to the last request a paid rung served that the plan could
    # have taken, before the plan served again; 0 when paid rungs served none.
    if pending.last_paid_at is None:
        return 0.0
    return (pending.last_paid_at - pending.at).total_seconds()


# --------------------------------------------------------------------------- entry points


def simulate(
    world: World,
    trace: Trace,
    policy: Policy,
    timing: Timing | None = None,
    on_progress: ProgressCallback | None = None,
    observer: Observer | None = None,
    *,
    given_order: bool = False,
    sticky: bool = False,
) -> PolicyResult:
    """Replay the trace under one policy on a simulated clock; `on_progress(policy, day,
    days)` is called as each simulated day starts, `observer` hears every step.
    `given_order`: plan connections in each allowlist's own order (the baseline before
    the order of preference); `sticky`: the gateway keeps conversations on their last
    connection while allowed."""
    run = _Run(
        world, policy, timing or Timing(), trace, observer, given_order=given_order, sticky=sticky
    )
    days = max(1, math.ceil((trace.end - trace.start) / timedelta(days=1)))
    next_day = 0
    day = timedelta(days=1)
    for request in trace.requests:
        if on_progress is not None:
            while next_day < days and request.at >= trace.start + day * next_day:
                on_progress(policy, next_day + 1, days)
                next_day += 1
        run.handle(request)
    if on_progress is not None:
        # Quiet days at the end still count, so the caller always hears the last one.
        for remaining in range(next_day, days):
            on_progress(policy, remaining + 1, days)
    return run.finish(trace.hours)


def simulate_all(
    world: World,
    trace: Trace,
    policies: Iterable[Policy] = ALL_POLICIES,
    timing: Timing | None = None,
    on_progress: ProgressCallback | None = None,
) -> tuple[PolicyResult, ...]:
    """Replay the trace under every policy, each against fresh providers."""
    return tuple(simulate(world, trace, policy, timing, on_progress) for policy in policies)
