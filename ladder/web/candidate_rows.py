"""What the candidates pages show: each registered candidate with the published pools it
lands in and, where it does not, the exclusions the decisions gave (no rule is
recomputed here: the placements are read off `services.decide_published`, whose
decisions equal `services.decide_registered`'s)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from ladder.core import DecidedCandidate, Decision, Exclusion, Reason, Rung
from ladder.core.types import BY_DESIGN_REASONS, RUNG_WIDE_REASONS
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


class CellState(StrEnum):
    """What one cell of the candidates matrix says."""

    IN = "in"
    BY_DESIGN = "out by design"
    OUT = "out"


# The few words a cell out by design shows for its reason (the sentence is on the
# candidate's page): what the connection is, not what went wrong.
DESIGN_WORDS: dict[Reason, str] = {
    Reason.METERED: "metered",
    Reason.KEYLESS_NOT_SUBSCRIPTION: "keyless",
    Reason.UNCURATED: "uncurated",
}


@dataclass(frozen=True, slots=True)
class MatrixCell:
    """One candidate against one auto id: in, out by design, or out; only the
    unexpected exclusions are spelled out, a closed rung is named (its cause is said
    once, in its `RungNote`)."""

    auto_id: str
    state: CellState
    placement: Placement | None  # None: the candidate does not list the id's category
    unexpected: tuple[Exclusion, ...] = ()
    closed_rungs: tuple[Rung, ...] = ()
    design: tuple[str, ...] = ()  # the few words of its by-design reasons
    # A category pool's cell that would spell out just what its flat pool's cell does:
    # the flat auto id, said instead ("out as in auto/subscription").
    same_as: str | None = None

    @property
    def shows_via(self) -> bool:
        """Whether the cell names the connections it dispatches to: an allowlist's
        passing subset, in order of preference (a pinned one is in its row already)."""
        return self.placement is not None and not self.placement.entries[0].connection_id


@dataclass(frozen=True, slots=True)
class RungNote:
    """A cause that closes a whole paid rung (its budget), said once for every pool."""

    rung: Rung
    reason: Reason
    detail: str


@dataclass(frozen=True, slots=True)
class MatrixRow:
    row: CandidateRow
    cells: tuple[MatrixCell, ...]

    @property
    def name(self) -> str:
        """The candidate as the live region names it: "claude/claude-sonnet-4-5 #3"."""
        candidate = self.row.candidate
        return f"{candidate.provider}/{candidate.model} #{candidate.pk}"


@dataclass(frozen=True, slots=True)
class CandidateMatrix:
    """Candidates (rows) against the published auto ids (columns), with the rung-wide
    causes; read off the decisions' entries and exclusions only."""

    auto_ids: tuple[str, ...]
    rows: tuple[MatrixRow, ...]
    rung_notes: tuple[RungNote, ...]


def _cell(auto_id: str, category: str | None, placement: Placement | None) -> MatrixCell:
    if placement is None:
        return MatrixCell(auto_id, CellState.BY_DESIGN, None, design=(f"not {category}",))
    closed = tuple(
        dict.fromkeys(
            e.rung
            for e in placement.exclusions
            if e.reason in RUNG_WIDE_REASONS and e.rung is not None
        )
    )
    unexpected = tuple(
        e
        for e in placement.exclusions
        if e.reason not in BY_DESIGN_REASONS and e.reason not in RUNG_WIDE_REASONS
    )
    if placement.lands:
        return MatrixCell(auto_id, CellState.IN, placement, unexpected)
    design = tuple(
        dict.fromkeys(
            DESIGN_WORDS[e.reason] for e in placement.exclusions if e.reason in BY_DESIGN_REASONS
        )
    )
    if unexpected or closed or not design:
        return MatrixCell(auto_id, CellState.OUT, placement, unexpected, closed)
    return MatrixCell(auto_id, CellState.BY_DESIGN, placement, design=design)


def _as_in_flat(cell: MatrixCell, flat: MatrixCell | None) -> MatrixCell:
    """A category cell that spells out what its flat pool's cell does, said by
    reference: the same sentences are not repeated across a row."""
    if (
        flat is None
        or not cell.unexpected
        or (cell.state, cell.unexpected, cell.closed_rungs)
        != (flat.state, flat.unexpected, flat.closed_rungs)
        or (
            cell.placement is not None
            and flat.placement is not None
            and cell.placement.rungs != flat.placement.rungs
        )
    ):
        return cell
    return MatrixCell(cell.auto_id, cell.state, cell.placement, same_as=flat.auto_id)


def rung_notes(decisions: Sequence[Decision]) -> tuple[RungNote, ...]:
    """Each paid rung closed as a whole, once, whichever pools say so, by rung."""
    notes: dict[Rung, RungNote] = {}
    for decision in decisions:
        for exclusion in decision.excluded:
            rung = exclusion.rung
            if exclusion.reason in RUNG_WIDE_REASONS and rung is not None and rung not in notes:
                notes[rung] = RungNote(rung, exclusion.reason, exclusion.detail)
    return tuple(notes[rung] for rung in sorted(notes))


def candidate_matrix(
    rows: Sequence[CandidateRow], decisions: Sequence[Decision]
) -> CandidateMatrix:
    """The matrix of these rows over every published auto id (no queries)."""
    columns = [(d.auto_id.auto_id, d.auto_id.category, d.auto_id.grouping) for d in decisions]
    matrix_rows = []
    for row in rows:
        by_id = {placement.auto_id: placement for placement in row.placements}
        flat: dict[str, MatrixCell] = {}
        cells = []
        for auto_id, category, grouping in columns:
            cell = _cell(auto_id, category, by_id.get(auto_id))
            if category is None:
                flat[grouping] = cell
            else:
                cell = _as_in_flat(cell, flat.get(grouping))
            cells.append(cell)
        matrix_rows.append(MatrixRow(row, tuple(cells)))
    return CandidateMatrix(
        tuple(auto_id for auto_id, _, _ in columns), tuple(matrix_rows), rung_notes(decisions)
    )


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
