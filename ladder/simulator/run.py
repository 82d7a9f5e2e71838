"""One policy over one trace on a simulated clock, calling the pure core as the shell
does: decide, apply_event, hysteresis_after and the polling rules."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Final

from billing.tiers import Tier
from ladder import core
from ladder.core import (
    CandidateIn,
    Rung,
    RungSpend,
)
from ladder.simulator.results import (
    ALL_POLICIES,
    Observer,
    Outcome,
    Policy,
    PolicyResult,
    ProgressCallback,
    Step,
)
from ladder.simulator.state import ConnectionState, lag_of
from ladder.simulator.trace import Request, Selection, Trace
from ladder.simulator.world import Timing, World

PAID_RUNGS: Final = (Rung.CHEAP, Rung.PREMIUM)
_ZERO: Final = Decimal(0)

# --------------------------------------------------------------------------- one run


@dataclass(frozen=True, slots=True)
class _Route:
    """Per selection: its candidates, the plan connections it can reach, and every
    (candidate, connection) pair in the scorer's order (for the cost sort)."""

    candidates: tuple[CandidateIn, ...]
    reachable_plans: tuple[str, ...]
    pairs: tuple[tuple[CandidateIn, str], ...]


class _Run(ConnectionState):
    """One policy over one trace: the connections' state (`state.py`), routing and
    accounting. Mutable state, but no IO and no clock."""

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
        single_window: bool = False,
        heed_evidence: bool = True,
    ) -> None:
        super().__init__(
            world,
            policy,
            timing,
            trace,
            observer,
            single_window=single_window,
            heed_evidence=heed_evidence,
        )
        self.known_models = frozenset(c.model for c in world.candidates)
        # `given_order`: the plan connections of an entry in the allowlist's own order, as
        # before "Which plan connection first" (the comparison's baseline). `sticky`: the
        # gateway keeps a conversation on its last connection while its entry lists it
        # (omniroute_client.sticky).
        self.given_order = given_order
        self.sticky = sticky
        self.last_connection: dict[int, tuple[Rung, str]] = {}
        self.auto_id = (
            core.SUBSCRIPTION_AUTO_ID
            if policy == Policy.SUBSCRIPTION_ONLY
            else core.THRIFTY_AUTO_ID
        )
        self.tiers: dict[tuple[str, str], Tier] = {
            (c.provider, c.model): world.prices.tier_of(
                c.provider, c.model, self.config.cheap_max_input_usd_per_mtok
            )
            for c in world.candidates
        }
        self.routes: dict[Selection, _Route] = {}
        self.spend_by_window: dict[tuple[Rung, datetime], Decimal] = {}
        self.budget_bounds: tuple[datetime, datetime] | None = None
        self.last_rung: dict[Selection, Rung] = {}

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
                known_models=self.known_models,
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
        has_headroom = upstream.has_headroom(model)
        if not has_headroom and not connection.bills_past_plan:
            scope = None if self.single_window else upstream.full_scope(model)
            if scope is not None:
                self._refused_in_scope(cid, scope, upstream.serves_again_at(model), now)
            else:
                self._refused_by_upstream(cid, upstream.serves_again_at(model), now)
            return False
        cost = _ZERO
        if connection.is_billed or not has_headroom:
            # Metered keys bill every request; a plan past its windows bills its overage.
            cost = self.world.prices.cost_usd(
                provider, model, request.input_tokens, request.output_tokens
            )
        if not has_headroom:
            self.tally.overage += cost
            self.tally.overage_requests += 1
        upstream.consume(request, model)
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
        self._account(cid, rung, cost, request, route, model)
        return True

    def _account(
        self, cid: str, rung: Rung, cost: Decimal, request: Request, route: _Route, model: str
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
            if any(plan.is_above(self.config.reentry_floor, model) for plan in plans):
                tally.paid_with_headroom += 1
            elif any(plan.is_above(self.config.exit_cutoff_percent, model) for plan in plans):
                tally.paid_in_band += 1
            for plan in route.reachable_plans:
                for pending in self.pending.get(plan, ()):
                    pending.last_paid_at = now
        if self.connections[cid].is_plan:
            for pending in self.pending.pop(cid, ()):
                tally.lags.append(lag_of(pending))
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
            tally.lags.extend(lag_of(pending) for pending in pendings)
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
            plan_overage_usd=tally.overage,
            plan_overage_requests=tally.overage_requests,
        )


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
    single_window: bool = False,
    heed_evidence: bool = True,
) -> PolicyResult:
    """Replay the trace under one policy on a simulated clock; `on_progress(policy, day,
    days)` is called as each simulated day starts, `observer` hears every step.
    `given_order`: plan connections in each allowlist's own order (the baseline before
    the order of preference); `sticky`: the gateway keeps conversations on their last
    connection while allowed; `single_window`: every window binds the whole connection
    (the rule before windows scoped to a model); `heed_evidence` False: a plan's "can
    meter" evidence is ignored (the catalog alone, as before billing evidence)."""
    run = _Run(
        world,
        policy,
        timing or Timing(),
        trace,
        observer,
        given_order=given_order,
        sticky=sticky,
        single_window=single_window,
        heed_evidence=heed_evidence,
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
