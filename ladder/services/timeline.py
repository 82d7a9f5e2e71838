"""The pool timeline: record who entered or left a published pool, when and why.

Recorded when a registered decision is computed (a cache miss, ladder.services.decisions)
and by the beat (`decisions.record_published`), never per request. Each process keeps the
membership it last saw recorded per auto id (compared in memory, no hashing, no JSON),
so an unchanged recomputation costs no query; a different one costs one (the stored
membership), and a real change a compare-and-set on the stored version plus one insert
of its transitions. Two processes
computing the same change race on the version: one wins, the other records nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F, Q

from billing.keyset import decode_position, encode_position
from ladder.core import AutoId, Decision, Rung
from ladder.core.timeline import (
    Change,
    Lanes,
    Member,
    Transition,
    lanes,
    membership,
    membership_from_rows,
    membership_rows,
    transitions,
)
from ladder.core.types import DecidedCandidate
from ladder.models import PoolMembership, PoolTransition

DETAIL_MAX = 300

_lock = threading.Lock()
# auto id -> the pool entries of the last decision this process saw recorded, and its
# membership. The entries compare first (a tuple compare whose strings are shared with the
# cached registered candidates: mostly identity checks); a reordered pool then compares
# the membership (order-free).
_known: dict[str, tuple[tuple[DecidedCandidate, ...], dict[Member, Rung]]] = {}


def clear_known() -> None:
    """Forget the memberships this process saw (tests; a restored database)."""
    with _lock:
        _known.clear()


def note_decision(decision: Decision, *, verify: bool = False) -> list[Transition]:
    """Record the transitions from the stored membership of the decision's auto id to
    this decision's (none when unchanged or when a later decision was recorded first).
    No query when this process last saw the same membership stored, unless `verify`
    (the beat: another process may have stored a membership since, which this one must
    then move back)."""
    auto_id = decision.auto_id.auto_id
    known = None if verify else _known.get(auto_id)
    if known is not None and known[0] == decision.candidates:
        return []
    members = membership(decision)
    if known is not None and known[1] == members:
        _remember(auto_id, decision, members)
        return []
    stored = (
        PoolMembership.objects.filter(auto_id=auto_id)
        .values_list("members", "version", "computed_at")
        .first()
    )
    before = membership_from_rows(stored[0]) if stored is not None else {}
    if stored is not None and (before == members or stored[2] > decision.computed_at):
        # Unchanged, or a later decision was recorded first: this one is history.
        if before == members:
            _remember(auto_id, decision, members)
        return []
    found = transitions(auto_id, before, members, decision.excluded, decision.computed_at)
    version = stored[1] + 1 if stored is not None else 1
    try:
        with transaction.atomic():
            if stored is None:
                PoolMembership.objects.create(
                    auto_id=auto_id,
                    members=membership_rows(members),
                    version=version,
                    computed_at=decision.computed_at,
                )
            elif not PoolMembership.objects.filter(auto_id=auto_id, version=stored[1]).update(
                members=membership_rows(members),
                version=F("version") + 1,
                computed_at=decision.computed_at,
            ):
                return []  # another process moved it first: it records its own change
            PoolTransition.objects.bulk_create([_row(transition, version) for transition in found])
    except IntegrityError:
        return []  # another process created the first membership of this auto id
    _remember(auto_id, decision, members)
    return found


def _remember(auto_id: str, decision: Decision, members: dict[Member, Rung]) -> None:
    with _lock:
        _known[auto_id] = (decision.candidates, members)


def _row(transition: Transition, version: int) -> PoolTransition:
    return PoolTransition(
        at=transition.at,
        auto_id=transition.auto_id,
        version=version,
        change=transition.change.value,
        provider=transition.provider,
        model=transition.model,
        connection_id=transition.connection_id,
        rung=transition.rung.label if transition.rung is not None else None,
        reason=transition.reason.value if transition.reason is not None else None,
        detail=transition.detail[:DETAIL_MAX],
    )


def prune_transitions(*, older_than: datetime) -> int:
    """Delete transitions recorded before `older_than` (retention like readings)."""
    deleted, _ = PoolTransition.objects.filter(at__lt=older_than).delete()
    return deleted


# --- reading the timeline -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransitionPage:
    rows: list[PoolTransition]
    next_cursor: str | None


def encode_transition_cursor(row: PoolTransition) -> str:
    """An opaque cursor: the (at, id) position after which the next (older) page starts."""
    return encode_position(row.at, row.pk)


def decode_transition_cursor(cursor: str | None) -> tuple[datetime, int] | None:
    """The position a cursor names, or ValueError when this API did not give it out."""
    if cursor is None:
        return None
    at, pk = decode_position(cursor, datetime, int)
    return at, pk


def transition_page(
    auto_id: str,
    *,
    limit: int,
    after: tuple[datetime, int] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> TransitionPage:
    """One page of an auto id's transitions, newest first (`since` inclusive, `until`
    exclusive), after the `after` position: one query."""
    rows = PoolTransition.objects.filter(auto_id=auto_id)
    if since is not None:
        rows = rows.filter(at__gte=since)
    if until is not None:
        rows = rows.filter(at__lt=until)
    if after is not None:
        at, pk = after
        rows = rows.filter(Q(at__lt=at) | Q(at=at, pk__lt=pk))
    found = list(rows.order_by("-at", "-id")[: limit + 1])
    has_next = len(found) > limit
    found = found[:limit]
    return TransitionPage(found, encode_transition_cursor(found[-1]) if has_next else None)


def has_history(auto_id: AutoId) -> bool:
    """Whether the timeline ever recorded this auto id (one query)."""
    return PoolMembership.objects.filter(auto_id=auto_id.auto_id).exists()


def recorded_auto_ids() -> Sequence[str]:
    """Every auto id the timeline recorded a membership of (one query)."""
    return list(PoolMembership.objects.order_by("auto_id").values_list("auto_id", flat=True))


# The most transitions the lanes of one range are drawn from: past it the page says to
# pick a shorter range rather than draw lanes it cannot vouch for.
LANES_MAX_TRANSITIONS = 5000


def pool_lanes(
    auto_id: str, start: datetime, end: datetime, *, limit: int = LANES_MAX_TRANSITIONS
) -> Lanes | None:
    """A lane per connection of the pool over [start, end) and its empty spans (two
    queries: its transitions from `start` on, and its stored membership); None when more
    than `limit` transitions follow `start`."""
    rows = list(
        PoolTransition.objects.filter(auto_id=auto_id, at__gte=start)
        .order_by("at", "id")
        .values_list("at", "change", "provider", "model", "connection_id")[: limit + 1]
    )
    if len(rows) > limit:
        return None
    stored = (
        PoolMembership.objects.filter(auto_id=auto_id).values_list("members", flat=True).first()
    )
    current = membership_from_rows(stored or [])
    changes = [(at, Change(change), (p, m, c)) for at, change, p, m, c in rows]
    return lanes(changes, current, start, end)
