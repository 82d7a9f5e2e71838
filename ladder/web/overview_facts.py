"""What the overview says, in one vocabulary: per rung the connections usable in and
excluded from auto/thrifty (each excluded one named, with why), the distinct
connections each auto id holds, and the next change the page can foresee (the earliest
known instant, saying what it is; nothing foreseen while the readings are stale)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from ladder import services
from ladder.core import Decision, Exclusion, Rung
from ladder.core.types import RUNG_WIDE_REASONS
from ladder.web.presenters import Freshness

# Excluded connections named on a rung card; the rest are behind the card's link.
NAMED_PER_RUNG = 8


@dataclass(frozen=True, slots=True)
class ExcludedConnection:
    """A connection left out of auto/thrifty on a rung, with its first exclusion."""

    connection_id: str
    exclusion: Exclusion

    @property
    def is_rung_wide(self) -> bool:
        """Out for what closes the whole rung (its budget): said once, on the card."""
        return self.exclusion.reason in RUNG_WIDE_REASONS


@dataclass(frozen=True, slots=True)
class RungSummary:
    """One rung of auto/thrifty: the connections usable on it and those excluded."""

    rung: Rung
    usable: int
    excluded: list[ExcludedConnection]  # every excluded connection, by id
    reasons: list[tuple[str, int]]
    budget: services.RungBudget | None

    @property
    def named(self) -> list[ExcludedConnection]:
        return self.excluded[:NAMED_PER_RUNG]

    @property
    def unnamed(self) -> int:
        return max(len(self.excluded) - NAMED_PER_RUNG, 0)

    @property
    def closed_by(self) -> Exclusion | None:
        """What closes the whole rung (its budget spent, or 0), said once on the card
        rather than beside each connection it keeps out."""
        return next((e.exclusion for e in self.excluded if e.is_rung_wide), None)


def rung_summaries(thrifty: Decision, spend: services.SpendSummary) -> list[RungSummary]:
    """Per rung: distinct connections usable and excluded (named, in id order; a
    connection usable on the rung through another candidate is not excluded there)."""
    usable: dict[Rung, set[str]] = {rung: set() for rung in Rung}
    excluded: dict[Rung, dict[str, Exclusion]] = {rung: {} for rung in Rung}
    for entry in thrifty.candidates:
        usable[entry.rung].update(entry.connection_ids)
    for exclusion in thrifty.excluded:
        if exclusion.rung is not None:
            excluded[exclusion.rung].setdefault(exclusion.connection_id, exclusion)
    summaries = []
    for rung in Rung:
        left_out = [
            ExcludedConnection(connection_id, exclusion)
            for connection_id, exclusion in sorted(excluded[rung].items())
            if connection_id not in usable[rung]
        ]
        reasons = Counter(item.exclusion.reason.summary for item in left_out).most_common(3)
        summaries.append(
            RungSummary(
                rung=rung,
                usable=len(usable[rung]),
                excluded=left_out,
                reasons=reasons,
                budget=spend.rungs.get(rung.label),
            )
        )
    return summaries


def distinct_connections(decision: Decision) -> int:
    """The distinct connections serving at least one entry of a pool."""
    return len({c for entry in decision.candidates for c in entry.connection_ids})


@dataclass(frozen=True, slots=True)
class NextChange:
    """The earliest instant the overview knows something may change, and what it is.
    `at` None: nothing foreseen (`why` says why)."""

    at: datetime | None
    what: str


def next_change(subscription: Decision, thrifty: Decision, freshness: Freshness) -> NextChange:
    """The earliest of: a connection's possible return to a pool (a reset, a cooldown's
    end, a budget window's end) and the next quota reset of any current reading. While
    the readings are stale no instant is foreseen: the next reading decides."""
    if freshness.stale_since is not None:
        return NextChange(
            None, "none foreseen while the readings are stale: the next reading decides"
        )
    known: list[tuple[datetime, str]] = []
    returns = [d.next_change_at for d in (subscription, thrifty) if d.next_change_at]
    if returns:
        known.append((min(returns), "an excluded connection may come back to a pool"))
    if freshness.health.next_reset_at is not None:
        known.append((freshness.health.next_reset_at, "a quota reset"))
    if not known:
        return NextChange(None, "none known: no exclusion ends at a known time and no reset is due")
    at = min(when for when, _ in known)
    what = " and ".join(text for when, text in known if when == at)
    return NextChange(at, what)
