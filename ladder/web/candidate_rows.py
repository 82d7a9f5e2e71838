"""What the candidates pages show: each registered candidate with the published pools it
lands in and, where it does not, the exclusions the decisions gave (no rule is
recomputed here: the placements are read off `services.decide_published`, whose
decisions equal `services.decide_registered`'s)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ladder.core import DecidedCandidate, Decision, Exclusion, Rung
from ladder.models import Candidate
from ladder.web.presenters import why_first


@dataclass(frozen=True, slots=True)
class Placement:
    """One published pool a candidate could be in: its entries there (one per rung it
    lands on) and its (connection) pairs that were left out, with the reason."""

    auto_id: str
    entries: tuple[DecidedCandidate, ...]
    exclusions: tuple[Exclusion, ...]
    # Why its first plan connection comes first there (None: fewer than two to order).
    why_first: str | None = None

    @property
    def lands(self) -> bool:
        return bool(self.entries)

    @property
    def rungs(self) -> tuple[Rung, ...]:
        return tuple(entry.rung for entry in self.entries)

    @property
    def connection_ids(self) -> tuple[str, ...]:
        """The connections the pool may dispatch this candidate to, in order."""
        return tuple(dict.fromkeys(c for entry in self.entries for c in entry.connection_ids))


@dataclass(frozen=True, slots=True)
class CandidateRow:
    candidate: Candidate
    connection_ids: tuple[str, ...]  # the connections it names, pinned or allowlisted
    unregistered: tuple[str, ...]  # of those, the ones no connection is registered under
    placements: tuple[Placement, ...]

    @property
    def is_pinned(self) -> bool:
        return self.candidate.connection_id is not None

    @property
    def lands_anywhere(self) -> bool:
        return any(placement.lands for placement in self.placements)


def named_connection_ids(candidate: Candidate) -> tuple[str, ...]:
    """The connections a candidate names: its pinned one, else its allowlist, each once."""
    if candidate.connection_id is not None:
        return (candidate.connection_id,)
    return tuple(dict.fromkeys(candidate.allowed_connection_ids or ()))


class _PoolIndex:
    """One decision's entries by candidate id and exclusions by (provider, model,
    connection): built once per decision, so a page of rows costs no rescans."""

    def __init__(self, decision: Decision, now: datetime) -> None:
        self.decision = decision
        self.now = now
        self.auto_id = decision.auto_id.auto_id
        self.category = decision.auto_id.category
        self.entries: dict[int | None, list[DecidedCandidate]] = {}
        for entry in decision.candidates:
            self.entries.setdefault(entry.id, []).append(entry)
        self.exclusions: dict[tuple[str, str, str], list[Exclusion]] = {}
        for exclusion in decision.excluded:
            key = (exclusion.provider, exclusion.model, exclusion.connection_id)
            self.exclusions.setdefault(key, []).append(exclusion)

    def placement(self, candidate: Candidate, connection_ids: Sequence[str]) -> Placement:
        exclusions: list[Exclusion] = []
        for connection_id in connection_ids:
            key = (candidate.provider, candidate.model, connection_id)
            # Pairs of the same provider, model and connection get the same verdict,
            # whichever candidate they came from: the first one is the one to show.
            found = self.exclusions.get(key)
            if found:
                exclusions.append(found[0])
        entries = tuple(self.entries.get(candidate.pk, ()))
        sentences = (why_first(entry, self.decision, self.now) for entry in entries)
        return Placement(
            self.auto_id,
            entries,
            tuple(exclusions),
            next((sentence for sentence in sentences if sentence is not None), None),
        )


def candidate_rows(
    candidates: Iterable[Candidate],
    decisions: Sequence[Decision],
    registered: set[str],
    now: datetime,
) -> list[CandidateRow]:
    """Rows for these candidates: for each, the flat pools and the category pools of its
    own categories, in the published order (no queries)."""
    indexes = [_PoolIndex(decision, now) for decision in decisions]
    rows = []
    for candidate in candidates:
        named = named_connection_ids(candidate)
        categories = set(candidate.categories or ())
        placements = tuple(
            index.placement(candidate, named)
            for index in indexes
            if index.category is None or index.category in categories
        )
        rows.append(
            CandidateRow(
                candidate=candidate,
                connection_ids=named,
                unregistered=tuple(c for c in named if c not in registered),
                placements=placements,
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class NamingCandidate:
    """A candidate that names one connection, and how."""

    candidate: Candidate
    is_pinned: bool


def candidates_naming(connection_id: str, candidates: Iterable[Candidate]) -> list[NamingCandidate]:
    """The candidates that name a connection, pinned or in their allowlist."""
    return [
        NamingCandidate(candidate, candidate.connection_id == connection_id)
        for candidate in candidates
        if connection_id in named_connection_ids(candidate)
    ]
