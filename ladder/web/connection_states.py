"""Where each connection stands in the published pools, read off the decisions (no rule
is recomputed here), one word for it, and the connections list's filters and sorts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.utils.http import urlencode

from billing.classify import Billing
from ladder.core import Decision, Exclusion, Reason, Rung
from ladder.web.presenters import ConnectionRow


class StandState(StrEnum):
    """One word for where a connection stands now, in the filter's vocabulary."""

    IN_PLAY = "in play"  # an entry of at least one published pool
    COOLING_DOWN = "cooling down"
    DROPPED_OUT = "dropped out"
    EXCLUDED = "excluded"  # named by a candidate, in no pool, for another reason
    INACTIVE = "inactive"
    NO_CANDIDATE = "no candidate"  # in no pool: no candidate names it

    @property
    def slug(self) -> str:
        return self.value.replace(" ", "-")


STATE_BY_SLUG = {state.slug: state for state in StandState}


@dataclass(frozen=True, slots=True)
class ExclusionGroup:
    """One sentence of why a connection is left out, and where: the pools and the
    candidates it holds for."""

    auto_ids: tuple[str, ...]
    candidates: tuple[str, ...]  # "provider/model"
    rung: Rung | None
    reason: Reason
    detail: str


@dataclass(slots=True)
class Membership:
    """The published pools a connection is an entry of, and its exclusions elsewhere."""

    pools: list[str] = field(default_factory=list)
    exclusions: list[tuple[str, Exclusion]] = field(default_factory=list)

    def grouped(self) -> list[ExclusionGroup]:
        """Its exclusions with one sentence each: the pools and candidates that share a
        rung, reason and sentence on one line (a dropped-out plan is one line, not one
        per pool), in first-seen order."""
        groups: dict[tuple[Rung | None, str, str], tuple[list[str], list[str]]] = {}
        for auto_id, exclusion in self.exclusions:
            key = (exclusion.rung, exclusion.reason.value, exclusion.detail)
            auto_ids, candidates = groups.setdefault(key, ([], []))
            if auto_id not in auto_ids:
                auto_ids.append(auto_id)
            candidate = f"{exclusion.provider}/{exclusion.model}"
            if candidate not in candidates:
                candidates.append(candidate)
        return [
            ExclusionGroup(tuple(auto_ids), tuple(candidates), rung, Reason(reason), detail)
            for (rung, reason, detail), (auto_ids, candidates) in groups.items()
        ]

    def reasons(self) -> list[str]:
        """The distinct reason codes of its exclusions, in first-seen order."""
        return list(dict.fromkeys(exclusion.reason.value for _, exclusion in self.exclusions))


def memberships(decisions: Iterable[Decision]) -> dict[str, Membership]:
    """Per connection named by any candidate: its pools and exclusions (no queries)."""
    found: dict[str, Membership] = {}
    for decision in decisions:
        auto_id = decision.auto_id.auto_id
        for entry in decision.candidates:
            for connection_id in entry.connection_ids:
                pools = found.setdefault(connection_id, Membership()).pools
                if not pools or pools[-1] != auto_id:
                    pools.append(auto_id)
        for exclusion in decision.excluded:
            found.setdefault(exclusion.connection_id, Membership()).exclusions.append(
                (auto_id, exclusion)
            )
    return found


def stand_state(row: ConnectionRow, membership: Membership | None) -> StandState:
    """Inactive, then unnamed, then in play (in some pool), else why it is in none."""
    if not row.connection.is_active:
        return StandState.INACTIVE
    if membership is None:
        return StandState.NO_CANDIDATE
    if membership.pools:
        return StandState.IN_PLAY
    if row.cooldown_until is not None:
        return StandState.COOLING_DOWN
    if row.is_dropped_out:
        return StandState.DROPPED_OUT
    return StandState.EXCLUDED


@dataclass(frozen=True, slots=True)
class StandingRow:
    """A connections-table row with where it stands."""

    row: ConnectionRow
    state: StandState
    membership: Membership | None

    def __getattr__(self, name: str) -> Any:  # the template reads the row's fields
        return getattr(self.row, name)


# --- the list's filters and sorts ---------------------------------------------------------

RUNG_CHOICES = tuple(rung.label for rung in Rung)
BILLING_CHOICES = tuple(billing.value for billing in Billing)


@dataclass(frozen=True, slots=True)
class ListQuery:
    """The list's filters and sort, as read from the query string (unknown values are
    dropped: a typo shows every connection, never an error)."""

    rung: str = ""
    billing: str = ""
    state: str = ""
    sort: str = ""
    descending: bool = False

    @property
    def is_computed(self) -> bool:
        """Whether the list must be computed whole before paging (a filter or sort on
        something the database does not store)."""
        sorted_by_id = self.sort in ("", "connection") and not self.descending
        return bool(self.rung or self.billing or self.state) or not sorted_by_id

    def params(self) -> dict[str, str]:
        values = {"rung": self.rung, "billing": self.billing, "state": self.state}
        if self.sort:
            values["sort"] = f"-{self.sort}" if self.descending else self.sort
        return {name: value for name, value in values.items() if value}


def _missing_last(value: float | None, descending: bool) -> tuple[bool, float]:
    if value is None:
        return (True, 0.0)
    return (False, -value if descending else value)


SORTS: dict[str, Callable[[StandingRow], Any]] = {
    "connection": lambda r: r.row.connection.connection_id,
    "billing": lambda r: (r.row.verdict.billing, r.row.connection.connection_id),
    "rung": lambda r: (min(r.row.rungs, default=len(Rung)), r.row.connection.connection_id),
    "quota": lambda r: r.row.reading.remaining_percent if r.row.reading else None,
    "state": lambda r: (list(StandState).index(r.state), r.row.connection.connection_id),
    "cooldown": lambda r: r.row.cooldown_until.timestamp() if r.row.cooldown_until else None,
    "reading": lambda r: r.row.reading.checked_at.timestamp() if r.row.reading else None,
}
# Numeric sorts put connections without a value last in either direction.
NUMERIC_SORTS = frozenset({"quota", "cooldown", "reading"})


def list_query(get: Any) -> ListQuery:
    """The filters and sort of a request's query string."""
    rung = get.get("rung", "")
    billing = get.get("billing", "")
    state = get.get("state", "")
    sort = get.get("sort", "")
    descending = sort.startswith("-")
    sort = sort.removeprefix("-")
    return ListQuery(
        rung=rung if rung in RUNG_CHOICES else "",
        billing=billing if billing in BILLING_CHOICES else "",
        state=state if state in STATE_BY_SLUG else "",
        sort=sort if sort in SORTS else "",
        descending=descending and sort in SORTS,
    )


def filtered_sorted(rows: Sequence[StandingRow], query: ListQuery) -> list[StandingRow]:
    """The rows the filters keep, in the sort's order (stable: ties keep the id order)."""
    kept = [
        r
        for r in rows
        if (not query.rung or query.rung in (rung.label for rung in r.row.rungs))
        and (not query.billing or r.row.verdict.billing == query.billing)
        and (not query.state or r.state.slug == query.state)
    ]
    if not query.sort:
        return kept
    key = SORTS[query.sort]
    if query.sort in NUMERIC_SORTS:
        return sorted(kept, key=lambda r: _missing_last(key(r), query.descending))
    return sorted(kept, key=key, reverse=query.descending)


@dataclass(frozen=True, slots=True)
class SortLink:
    """A column header's link: sorts by this column, or reverses it when it is the one."""

    column: str
    query: str
    current: str  # "", "ascending" or "descending" (for aria-sort)


def sort_links(query: ListQuery, search: str) -> dict[str, SortLink]:
    """Each column's sort link, keeping the search and the filters."""
    links = {}
    for column in SORTS:
        is_current = query.sort == column
        descending = is_current and not query.descending
        params = {**({"q": search} if search else {}), **query.params()}
        params["sort"] = f"-{column}" if descending else column
        current = ("descending" if query.descending else "ascending") if is_current else ""
        links[column] = SortLink(column, urlencode(params), current)
    return links
