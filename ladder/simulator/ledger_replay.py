""" "What would have happened": a past period's recorded requests (the ledger) replayed
against a different purchase (one more plan seat of a kind, one seat fewer, a different
budget per rung), answered in money. Pure: the shell hands in the requests and the seats.

The model, deliberately small and stated:

- Each request names the provider that could serve it on a plan (`provider`), its list
  price (`list_price_usd`: what a plan saves by serving it) and what it costs when no
  plan serves it (`paid_rung`, `paid_usd`: its recorded paid cost, or for a request a
  plan served, its metered price on the rung its model would take).
- A plan seat serves requests of its provider while its window has capacity left, in
  list-price dollars per window (`capacity_usd`, windows of `window` from `anchor`: the
  shell measures it from the seat's readings and ledger); seats are tried in their order.
- A request no seat can take met an empty `auto/subscription` (when a seat of its
  provider exists at all) and is paid on its rung while that rung's budget for the
  period allows; past the budget it is not served.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from typing import Final

from ladder.core import Rung
from ladder.core.forecast import SAME_WINDOW_TOLERANCE, ForecastReading

_ZERO: Final = Decimal(0)
# A seat whose readings never name two resets: a 5-hour window (the plans' short window).
DEFAULT_WINDOW: Final = timedelta(hours=5)
# Less than this many percent used over the period: too little to measure a capacity from.
MIN_MEASURED_PERCENT: Final = 1.0
# How often (in requests) a replay reports its progress.
PROGRESS_EVERY: Final = 500


@dataclass(frozen=True, slots=True)
class LedgerRequest:
    """One recorded request, as the replay reads it."""

    at: datetime
    provider: str
    list_price_usd: Decimal
    paid_rung: Rung
    paid_usd: Decimal


@dataclass(frozen=True, slots=True)
class Seat:
    """One plan seat: `capacity_usd` of list price per window of `window` from `anchor`."""

    seat_id: str
    provider: str
    capacity_usd: Decimal
    window: timedelta
    anchor: datetime

    def window_of(self, at: datetime) -> int:
        """The index of the window `at` falls in."""
        return (at - self.anchor) // self.window


@dataclass(frozen=True, slots=True)
class Change:
    """What differs from what was bought: seats added, seats removed, budgets per rung
    for the period (a rung not named keeps `budgets` of the replay; None: no budget)."""

    add_seats: tuple[Seat, ...] = ()
    remove_seat_ids: tuple[str, ...] = ()
    budgets: Mapping[Rung, Decimal | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What the period would have cost."""

    paid_usd: Decimal
    saved_usd: Decimal
    paid_by_rung: Mapping[Rung, Decimal]
    plan_requests: int
    paid_requests: int
    empty_subscription_requests: int
    unserved_requests: int


def replay(
    requests: Sequence[LedgerRequest],
    seats: Sequence[Seat],
    change: Change = Change(),
    *,
    budgets: Mapping[Rung, Decimal | None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay `requests` in time order through `seats` with `change` applied;
    `on_progress(done, total)` every `PROGRESS_EVERY` requests and at the end."""
    removed = set(change.remove_seat_ids)
    in_use = [s for s in seats if s.seat_id not in removed] + list(change.add_seats)
    limits: dict[Rung, Decimal | None] = dict(budgets or {})
    limits.update(change.budgets)
    used: dict[tuple[str, int], Decimal] = {}
    paid_by_rung: dict[Rung, Decimal] = {Rung.CHEAP: _ZERO, Rung.PREMIUM: _ZERO}
    saved = _ZERO
    plan_count = paid_count = empty_count = unserved_count = 0
    # A request a plan of its provider could serve, as bought or as changed, that finds no
    # seat with room met an empty auto/subscription.
    providers_with_seats = {s.provider for s in (*seats, *change.add_seats)}
    ordered = sorted(requests, key=lambda r: r.at)
    for done, request in enumerate(ordered, start=1):
        if on_progress is not None and done % PROGRESS_EVERY == 0:
            on_progress(done, len(ordered))
        seat = _seat_for(request, in_use, used)
        if seat is not None:
            key = (seat.seat_id, seat.window_of(request.at))
            used[key] = used.get(key, _ZERO) + request.list_price_usd
            saved += request.list_price_usd
            plan_count += 1
            continue
        if request.provider in providers_with_seats:
            empty_count += 1
        rung = request.paid_rung
        limit = limits.get(rung)
        spent = paid_by_rung.get(rung, _ZERO)
        if limit is not None and spent + request.paid_usd > limit:
            unserved_count += 1
            continue
        paid_by_rung[rung] = spent + request.paid_usd
        paid_count += 1
    if on_progress is not None:
        on_progress(len(ordered), len(ordered))
    return ReplayResult(
        paid_usd=sum(paid_by_rung.values(), _ZERO),
        saved_usd=saved,
        paid_by_rung=paid_by_rung,
        plan_requests=plan_count,
        paid_requests=paid_count,
        empty_subscription_requests=empty_count,
        unserved_requests=unserved_count,
    )


def _seat_for(
    request: LedgerRequest, seats: Sequence[Seat], used: Mapping[tuple[str, int], Decimal]
) -> Seat | None:
    for seat in seats:
        if seat.provider != request.provider:
            continue
        left = seat.capacity_usd - used.get((seat.seat_id, seat.window_of(request.at)), _ZERO)
        if request.list_price_usd <= left:
            return seat
    return None


# --------------------------------------------------------------------------- seats measured


@dataclass(frozen=True, slots=True)
class MeasuredSeat:
    """A seat measured from its history, and how (the report states it)."""

    seat: Seat
    used_percent: float
    basis: str


def measure_seat(
    seat_id: str,
    provider: str,
    readings: Sequence[ForecastReading],
    served: Sequence[tuple[datetime, Decimal]],
    *,
    start: datetime,
) -> MeasuredSeat:
    """A plan seat's capacity per window from what it did over a period: the list price
    it served (`served`: when, how much) over the percent of its window that used, from
    its readings (each drop between two readings of one window). Its window is the
    typical gap between the resets its readings name (`DEFAULT_WINDOW` when they name
    fewer than two), anchored on one of them (`start` when none). A seat that used less
    than `MIN_MEASURED_PERCENT` cannot be measured: its capacity is what it served in
    its busiest window (at least that, it did serve)."""
    ordered = sorted(
        (r for r in readings if r.remaining_percent is not None), key=lambda r: r.checked_at
    )
    resets = sorted({r.reset_at for r in ordered if r.reset_at is not None})
    distinct: list[datetime] = []
    for reset in resets:
        if not distinct or reset - distinct[-1] >= SAME_WINDOW_TOLERANCE:
            distinct.append(reset)
    gaps = sorted(b - a for a, b in pairwise(distinct))
    window = gaps[len(gaps) // 2] if gaps else DEFAULT_WINDOW
    anchor = distinct[-1] if distinct else start
    used = 0.0
    for before, after in pairwise(ordered):
        if before.reset_at is None or after.reset_at is None:
            continue
        if abs(after.reset_at - before.reset_at) >= SAME_WINDOW_TOLERANCE:
            continue  # a reset between them: the rise is a refill, not a use
        assert before.remaining_percent is not None
        assert after.remaining_percent is not None
        used += max(0.0, before.remaining_percent - after.remaining_percent)
    if ordered:
        first, last = ordered[0].checked_at, ordered[-1].checked_at
        in_span = sum((usd for at, usd in served if first <= at <= last), _ZERO)
    else:
        in_span = _ZERO
    if used >= MIN_MEASURED_PERCENT and in_span > 0:
        capacity = (in_span * 100 / Decimal(str(round(used, 6)))).quantize(Decimal("0.0001"))
        basis = f"${in_span:.2f} of list price served for {used:.1f} % of its window used"
    else:
        seat = Seat(seat_id, provider, _ZERO, window, anchor)
        per_window: dict[int, Decimal] = {}
        for at, usd in served:
            index = seat.window_of(at)
            per_window[index] = per_window.get(index, _ZERO) + usd
        capacity = max(per_window.values(), default=_ZERO)
        basis = "too little use to measure: what it served in its busiest window"
    return MeasuredSeat(Seat(seat_id, provider, capacity, window, anchor), used, basis)
