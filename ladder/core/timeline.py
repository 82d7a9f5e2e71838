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
