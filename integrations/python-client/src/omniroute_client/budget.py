"""Budgets under bursts (spec/api.md, "Budgets under bursts"): each decision carries
`budget_left_usd` per budgeted rung, what the window still allowed when it was computed.
The client debits an estimate for each request it sends to a budgeted rung (`reserve`),
replaces it with the request's cost when its spend is reported (`settle`), and treats
the rung as spent locally once the debits since the decision would pass what was left,
until the server's next decision. A debit counts against a decision until its spend was
acknowledged by the control plane before that decision was fetched (it is then in the
decision's own figure).

The estimate of a rung: the operator's (`request_estimate_usd`), else the mean cost of
the requests settled on it so far, else 0 (nothing known: only settled costs count)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from .decisions import Decision

# A hair of tolerance for float sums (a budget of exactly five requests allows five).
EPSILON_USD = 1e-9


@dataclass
class Debit:
    rung: str
    amount: float
    landed_at: float | None = None  # when the control plane acknowledged its spend


class BudgetTracker:
    def __init__(self, estimates: Mapping[str, float] | None = None) -> None:
        for rung, value in (estimates or {}).items():
            if rung not in ("cheap", "premium") or not value >= 0:
                raise ValueError("request_estimate_usd: {'cheap'|'premium': USD >= 0}")
        self.estimates = dict(estimates or {})
        self._lock = threading.Lock()
        self._debits: dict[str, Debit] = {}
        self._by_request: dict[str, str] = {}
        self._settled: dict[str, tuple[int, float]] = {}
        self._held: dict[str, float] = {}  # pool key -> sent_at of its kept decision
        self._ids = itertools.count(1)
        self.refused = 0  # reservations refused: the rung was spent locally

    def estimate(self, rung: str) -> float:
        if rung in self.estimates:
            return self.estimates[rung]
        count, total = self._settled.get(rung, (0, 0.0))
        return total / count if count else 0.0

    def left(self, decision: Decision, rung: str) -> float | None:
        """What the decision allowed on `rung` less this client's debits since, or None
        (no budget)."""
        allowed = decision.budget_left_usd.get(rung)
        if allowed is None:
            return None
        with self._lock:
            debits = sum(
                d.amount
                for d in self._debits.values()
                if d.rung == rung and (d.landed_at is None or d.landed_at > decision.sent_at)
            )
        return float(allowed) - debits

    def reserve(self, decision: Decision, rung: str | None) -> str | None:
        """A ticket for one request on `rung` (its estimate debited), or None when the
        rung is spent locally (do not send it there)."""
        if rung is None or decision.budget_left_usd.get(rung) is None:
            return ""
        left = self.left(decision, rung)
        estimate = self.estimate(rung)
        with self._lock:
            if left is not None and (left <= EPSILON_USD or estimate > left + EPSILON_USD):
                self.refused += 1
                return None
            ticket = str(next(self._ids))
            self._debits[ticket] = Debit(rung, estimate)
        return ticket

    def release(self, ticket: str | None) -> None:
        """The request sent nothing billable (it failed): its debit goes."""
        if ticket:
            with self._lock:
                self._debits.pop(ticket, None)

    def settle(self, ticket: str | None, request_id: str, cost: float | None) -> None:
        """The request's spend was reported: its cost (when known) replaces the estimate."""
        if not ticket:
            return
        with self._lock:
            debit = self._debits.get(ticket)
            if debit is None:
                return
            if cost is not None:
                debit.amount = float(cost)
                count, total = self._settled.get(debit.rung, (0, 0.0))
                self._settled[debit.rung] = (count + 1, total + float(cost))
            self._by_request[request_id] = ticket

    def landed(self, request_ids: list[str]) -> None:
        """These spend entries were acknowledged: decisions fetched from now on count them."""
        now = time.time()
        with self._lock:
            for request_id in request_ids:
                ticket = self._by_request.pop(request_id, None)
                debit = self._debits.get(ticket) if ticket else None
                if debit is not None:
                    debit.landed_at = now
            self._prune()

    def new_decision(self, key: str, decision: Decision) -> None:
        with self._lock:
            self._held[key] = decision.sent_at
            self._prune()

    def _prune(self) -> None:
        """Debits that every held decision already counts are gone."""
        if not self._held:
            return
        oldest = min(self._held.values())
        for ticket in [
            t for t, d in self._debits.items() if d.landed_at is not None and d.landed_at < oldest
        ]:
            del self._debits[ticket]
