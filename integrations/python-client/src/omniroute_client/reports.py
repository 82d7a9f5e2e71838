"""Spend and events: queued to the background reporter (reporter.py, through its
spool), the kept decisions they invalidate, and the local budget tickets of a burst
(budget.py; spec: "Budgets under bursts")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .budget import BudgetTracker
from .cache import DecisionCache
from .decisions import Decision
from .events import event_for_exception, event_for_response, says_can_meter
from .reporter import Reporter


class Reports(DecisionCache):
    # Set by the client's constructor (client._Base).
    budget: BudgetTracker
    reporter: Reporter
    failing: set[str]
    invalidate_on_readings: bool

    def _landed(self, kind: str, invalidates: bool) -> None:
        # A failure (or the success that ends one) changes a pool: its landing
        # invalidates. Spend changes one only by crossing a budget, which moves the change
        # version: the feed covers it, unless the feed is not live.
        if (kind == "event" and invalidates) or (invalidates and not self.feed_live):
            self.invalidate()

    def _acked(self, kind: str, bodies: list[dict[str, Any]]) -> None:
        if kind == "spend":
            self.budget.landed([str(body.get("request_id")) for body in bodies])

    # -- budgets under bursts -------------------------------------------------------------

    def reserve(self, decision: Decision, rung: str | None) -> str | None:
        """Before sending a request to a candidate of `decision` on `rung`: a ticket (its
        estimated cost debited locally), or None when the rung is spent locally, by this
        client's debits since the decision (do not use it; the server's next decision
        says more). Pass the ticket to `report_spend`, or to `release` when the request
        billed nothing."""
        return self.budget.reserve(decision, rung)

    def release(self, ticket: str | None) -> None:
        self.budget.release(ticket)

    def report_event(self, connection_id: str, event: dict[str, Any]) -> bool:
        """Queue an event (never blocks). A failure, or the success that ends one,
        invalidates the kept decisions now and again once it has landed. A routine
        `success` (quota headers on a connection that has not failed: Anthropic sends them
        on every answer) does not, unless `invalidate_on_readings`: invalidating on it would
        cost a round trip per request. The reading it stores is seen through the change
        feed (the server moves the version only when it changes a pool) or, without one,
        within `revalidate_seconds`."""
        # A success saying the plan bills past its limit is not routine: the plan must
        # leave auto/subscription on the next decision (events.says_can_meter).
        routine = (
            event["kind"] == "success"
            and connection_id not in self.failing
            and not says_can_meter(event.get("headers"))
        )
        if event["kind"] == "success":
            self.failing.discard(connection_id)
        else:
            self.failing.add(connection_id)
        invalidates = not routine or self.invalidate_on_readings
        if invalidates:
            self.invalidate()
        # When the gateway saw the answer: the server applies events in that order.
        item = {"connection_id": connection_id, "observed_at": iso(self.clock()), **event}
        # A routine success only carries a reading: the newest one waiting is enough.
        coalesce = f"success:{connection_id}" if routine else None
        return self.reporter.put(
            "event", item, urgent=invalidates, invalidates=invalidates, coalesce_key=coalesce
        )

    def report_response(
        self,
        connection_id: str,
        status_code: int,
        headers: Any = None,
        body: Any = None,
        *,
        model: str | None = None,
    ) -> dict[str, Any] | None:
        """Report what an upstream answered (see `events.event_for_response`); `model`:
        the model the request asked for (what the headers say about one model, an Opus
        weekly cap, binds only that model)."""
        event = event_for_response(
            status_code,
            dict(headers or {}),
            body,
            after_failure=connection_id in self.failing,
            model=model,
        )
        if event is not None:
            self.report_event(connection_id, event)
        return event

    def report_exception(
        self, connection_id: str, exc: BaseException, *, model: str | None = None
    ) -> dict[str, Any] | None:
        event = event_for_exception(exc, model=model)
        if event is not None:
            self.report_event(connection_id, event)
        return event

    def report_spend(
        self, entry: dict[str, Any], *, may_cross_budget: bool = True, ticket: str | None = None
    ) -> bool:
        """Queue one spend entry (SpendEntry of the API; `request_id` is its idempotency key).

        Without a live change feed, the landing of spend that may cross a paid rung's budget
        invalidates the kept decisions; pass `may_cross_budget=False` for spend on a
        plan-included or free rung (it never counts against a budget) to spare the
        revalidation."""
        cost = entry.get("cost_usd")
        self.budget.settle(
            ticket, str(entry.get("request_id")), float(cost) if cost is not None else None
        )
        return self.reporter.put("spend", entry, invalidates=may_cross_budget)

    def flush(self, timeout: float = 10.0) -> bool:
        return self.reporter.flush(timeout)


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()
