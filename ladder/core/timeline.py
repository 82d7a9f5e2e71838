"""The pool timeline, pure: a decision's membership and the transitions between two.

A pool's membership is the set of (provider, model, connection) pairs it may dispatch
to, each with its rung: a pinned entry is one pair, an allowlisted entry one pair per
allowed connection. Its order, `computed_at`, `valid_until` and the exclusions' sentences
are not membership: they change without anyone entering or leaving.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from ladder.core.types import Exclusion, Reason, Rung

if TYPE_CHECKING:
    from ladder.core.decide import Decision

# (provider, model, connection_id) -> rung
Member = tuple[str, str, str]
Membership = Mapping[Member, Rung]


class Change(StrEnum):
    ENTERED = "entered"
    LEFT = "left"


@dataclass(frozen=True, slots=True)
class Transition:
    """One pair entering or leaving a published pool (api.md "Transition")."""

    at: datetime
    auto_id: str
    change: Change
    provider: str
    model: str
    connection_id: str
    rung: Rung | None
    reason: Reason | None
    detail: str


NO_LONGER_LISTED = (
    "No longer a registered candidate of this pool (deleted, or its connection list changed)"
)


def membership(decision: Decision) -> dict[Member, Rung]:
    """The pairs the decision's pool may dispatch to, with their rungs (the first entry
    of a pair wins when two candidates name it)."""
    members: dict[Member, Rung] = {}
    for entry in decision.candidates:
        for connection_id in entry.connection_ids:
            members.setdefault((entry.provider, entry.model, connection_id), entry.rung)
    return members


def membership_rows(members: Membership) -> list[list[str | int]]:
    """The membership as sorted JSON rows `[provider, model, connection_id, rung]`."""
    return sorted([*key, int(rung)] for key, rung in members.items())


def membership_from_rows(rows: Iterable[list[str | int]]) -> dict[Member, Rung]:
    """The inverse of `membership_rows`."""
    return {(str(p), str(m), str(c)): Rung(int(r)) for p, m, c, r in rows}


def _entered_detail(rung: Rung) -> str:
    return f"In the pool on the {rung.label} rung"


def transitions(
    auto_id: str,
    before: Membership,
    after: Membership,
    excluded: Iterable[Exclusion],
    at: datetime,
) -> list[Transition]:
    """What changed from `before` to `after`: every pair that left (with the reason the
    new decision excluded it for, from `excluded`), then every pair that entered, each
    in (provider, model, connection) order. A pair whose rung changed leaves and enters."""
    why: dict[Member, Exclusion] = {}
    for out in excluded:
        why.setdefault((out.provider, out.model, out.connection_id), out)
    left: list[Transition] = []
    entered: list[Transition] = []
    for key in sorted(before):
        rung = before[key]
        new_rung = after.get(key)
        if new_rung == rung:
            continue
        exclusion = why.get(key)
        if new_rung is not None:
            reason, detail = None, f"Moved to the {new_rung.label} rung"
        elif exclusion is not None:
            reason, detail = exclusion.reason, exclusion.detail
        else:
            reason, detail = None, NO_LONGER_LISTED
        left.append(Transition(at, auto_id, Change.LEFT, *key, rung, reason, detail))
    for key in sorted(after):
        rung = after[key]
        if before.get(key) == rung:
            continue
        entered.append(
            Transition(at, auto_id, Change.ENTERED, *key, rung, None, _entered_detail(rung))
        )
    return left + entered


# --------------------------------------------------------------------------- lanes

Span = tuple[datetime, datetime]


@dataclass(frozen=True, slots=True)
class Lane:
    """One connection over a range: the spans in which the pool could dispatch to it
    (any of its pairs in), clipped to the range."""

    connection_id: str
    spans: tuple[Span, ...]

    @property
    def seconds_in(self) -> float:
        return sum((end - start).total_seconds() for start, end in self.spans)


@dataclass(frozen=True, slots=True)
class Lanes:
    """A pool over [start, end): a lane per connection that was in it at some point,
    by connection id, and the spans in which it had no member at all."""

    start: datetime
    end: datetime
    lanes: tuple[Lane, ...]
    empty: tuple[Span, ...]

    @property
    def seconds_empty(self) -> float:
        return sum((end - start).total_seconds() for start, end in self.empty)


def lanes(
    changes: Iterable[tuple[datetime, Change, Member]],
    current: Iterable[Member],
    start: datetime,
    end: datetime,
) -> Lanes:
    """The lanes of a pool over [start, end) from its transitions at or after `start`
    (oldest first; those after `end` only say who was in before them) and the members
    it has now: a pair whose first change from `start` on is a departure was in at
    `start`, one with no change since is in at `start` exactly when it is in now.
    Changes at one instant are taken together (a pair moving rung leaves and enters at
    once: no gap)."""
    ordered = list(changes)
    first: dict[Member, Change] = {}
    for _, change, member in ordered:
        first.setdefault(member, change)
    now_in = set(current)
    members = {m for m in now_in if m not in first}
    members |= {m for m, change in first.items() if change == Change.LEFT}
    counts: dict[str, int] = {}
    for member in members:
        counts[member[2]] = counts.get(member[2], 0) + 1
    opened: dict[str, datetime] = {c: start for c in counts}
    spans: dict[str, list[Span]] = {c: [] for c in counts}
    empty: list[Span] = []
    empty_since: datetime | None = start if not members else None
    index = 0
    while index < len(ordered) and ordered[index][0] < end:
        at = ordered[index][0]
        touched: set[str] = set()
        while index < len(ordered) and ordered[index][0] == at:
            _, change, member = ordered[index]
            index += 1
            connection_id = member[2]
            if change == Change.ENTERED and member not in members:
                members.add(member)
                counts[connection_id] = counts.get(connection_id, 0) + 1
                touched.add(connection_id)
            elif change == Change.LEFT and member in members:
                members.discard(member)
                counts[connection_id] -= 1
                touched.add(connection_id)
        for connection_id in touched:
            spans.setdefault(connection_id, [])
            if counts[connection_id] > 0 and connection_id not in opened:
                opened[connection_id] = at
            elif counts[connection_id] == 0 and connection_id in opened:
                began = opened.pop(connection_id)
                if at > began:
                    spans[connection_id].append((began, at))
        if not members and empty_since is None:
            empty_since = at
        elif members and empty_since is not None:
            if at > empty_since:
                empty.append((empty_since, at))
            empty_since = None
    for connection_id, began in opened.items():
        if end > began:
            spans[connection_id].append((began, end))
    if empty_since is not None and end > empty_since:
        empty.append((empty_since, end))
    return Lanes(
        start,
        end,
        tuple(Lane(c, tuple(spans[c])) for c in sorted(spans)),
        tuple(empty),
    )
