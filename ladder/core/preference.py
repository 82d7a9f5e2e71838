"""Which plan connection first (spec/ladder.md): the order of preference of an entry's
plan connections, soonest-expiring capacity first.

An entry's `allowed_connection_ids` is a preference order, deliberately: the capacity
that expires soonest goes first (use it or lose it). Plan connections are ordered by the
reset of their binding window, soonest first; ties by remaining percent, most first; a
connection with no known reset goes last; the original order breaks the rest. Only the
subscription rung holds plan connections (a connection's rung follows its billing), and
every other rung keeps its original order.

The order reads one thing of each connection: its **preference key**, the reset and the
remaining percent of the binding window of its current reading, or none. For a candidate
whose model a window scoped to a model binds (spec/ladder.md, "Windows scoped to a
model"), the binding window is the one among the unscoped windows and those scopes (least
remaining; ties, the later reset): a seat whose weekly Opus cap has 5 % left is not
preferred for Opus because its unscoped window resets tomorrow. A key changes
only on a write (a reading, an event that stores one) or on its own at an instant that
a decision's `valid_until` already holds (the reading's reset, the reading turning stale),
so decisions stay cacheable: `ladder/core/changes.py` moves the `state` counter when a
write changes the key of a connection that serves somewhere (docs/HOT_PATH.md).

The key is read to the minute and the whole percent, deliberately. Providers recompute a
reset on every response, jittering by up to about 2 s around the same instant (a window
rolls over only when its reset moves by 60 s or more: spec/ladder.md), and Anthropic's
headers report the percent used to four places on every answer. At full precision each
such answer would move the `state` counter and throw away every cached decision; at this
precision a plan in use moves it about once per percent it spends. Resets are rounded to
the nearest minute (real resets sit on round instants, so jitter around one stays in its
minute); percents are rounded down.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from ladder.core.quota import is_reading_current
from ladder.core.scopes import scope_applies
from ladder.core.types import ConnectionView, LadderConfig, QuotaStatus, Reading

_SAFE: Final = QuotaStatus.SAFE


@dataclass(frozen=True, slots=True)
class PreferenceKey:
    """What the order reads of one plan connection: its binding window's reset, to the
    nearest minute, and the whole percent it has left (rounded down)."""

    reset_at: datetime
    remaining_percent: int


_HALF_MINUTE: Final = timedelta(seconds=30)


def reset_minute(reset_at: datetime) -> datetime:
    """A reset to the nearest minute (half a minute rounds up)."""
    shifted = reset_at + _HALF_MINUTE
    return shifted - timedelta(seconds=shifted.second, microseconds=shifted.microsecond)


# A sort key: (0, reset, -remaining) for a known key, (1,) for none (last, and among
# themselves in their original order: the sort is stable).
_SortKey = tuple[int, datetime, int] | tuple[int]
_UNKNOWN: Final[_SortKey] = (1,)


def _reading_key(
    reading: Reading | None, config: LadderConfig, now: datetime
) -> PreferenceKey | None:
    if (
        reading is None
        or reading.reset_at is None
        or reading.remaining_percent is None
        or reading.status != _SAFE
        or not is_reading_current(reading, config, now)
    ):
        return None
    return PreferenceKey(reset_minute(reading.reset_at), math.floor(reading.remaining_percent))


def preference_key(
    view: ConnectionView, config: LadderConfig, now: datetime
) -> PreferenceKey | None:
    """The key of a connection now: from a current reading that says SAFE with both a
    reset and a remaining percent; None otherwise (no known reset: it goes last)."""
    return _reading_key(view.reading, config, now)


def scoped_readings(
    view: ConnectionView, model: str, known_models: frozenset[str]
) -> tuple[Reading, ...]:
    """The readings of the connection's model scopes that bind `model` (a scope with only
    a cooldown has none)."""
    return tuple(
        scoped.reading
        for scoped in view.scoped
        if scoped.reading is not None and scope_applies(scoped.model_scope, model, known_models)
    )


def model_preference_key(
    view: ConnectionView,
    model: str,
    config: LadderConfig,
    now: datetime,
    known_models: frozenset[str],
) -> PreferenceKey | None:
    """The key of a connection for a candidate of `model`: its binding window among the
    unscoped one and the scopes that bind the model (least remaining; ties, the later
    reset). Any of them without a key (not current, not SAFE, no reset): no key."""
    binding = preference_key(view, config, now)
    for reading in scoped_readings(view, model, known_models):
        key = _reading_key(reading, config, now)
        if key is None or binding is None:
            return None
        if key.remaining_percent < binding.remaining_percent or (
            key.remaining_percent == binding.remaining_percent and key.reset_at > binding.reset_at
        ):
            binding = key
    return binding


def scoped_keys(
    view: ConnectionView, config: LadderConfig, now: datetime
) -> tuple[tuple[str, PreferenceKey | None], ...]:
    """Each model scope's own key (what `changes.moves_preference` compares: a write that
    moves one can move the connection's place for that scope's models)."""
    return tuple(
        (scoped.model_scope, _reading_key(scoped.reading, config, now)) for scoped in view.scoped
    )


def _sort_key(key: PreferenceKey | None) -> _SortKey:
    if key is None:
        return _UNKNOWN
    return (0, key.reset_at, -key.remaining_percent)


def preference_order(
    connection_ids: Sequence[str], keys: Mapping[str, PreferenceKey | None]
) -> tuple[str, ...]:
    """The plan connections `connection_ids` in order of preference, by their keys (an
    id without a key counts as no known reset)."""
    return tuple(sorted(connection_ids, key=lambda cid: _sort_key(keys.get(cid))))


class PlanOrder:
    """The order of preference within one decision: each connection's key computed once
    (many candidates share connections), each distinct list of passing plan connections
    sorted once."""

    __slots__ = (
        "_config",
        "_connections",
        "_keys",
        "_known_models",
        "_model_keys",
        "_now",
        "_orders",
    )

    def __init__(
        self,
        connections: Mapping[str, ConnectionView],
        config: LadderConfig,
        now: datetime,
        known_models: frozenset[str] = frozenset(),
    ) -> None:
        self._connections = connections
        self._config = config
        self._now = now
        self._known_models = known_models
        self._keys: dict[str, PreferenceKey | None] = {}
        self._model_keys: dict[tuple[str, str], PreferenceKey | None] = {}
        self._orders: dict[tuple[tuple[str, ...], str | None], list[str]] = {}

    @property
    def keys(self) -> Mapping[str, PreferenceKey | None]:
        """The keys computed so far: every connection of an entry that was ordered."""
        return self._keys

    @property
    def model_keys(self) -> Mapping[tuple[str, str], PreferenceKey | None]:
        """The keys for a model, by (connection, model), of the connections a window
        scoped to that model binds: they order that model's entries."""
        return self._model_keys

    def _binds(self, connection_id: str, model: str) -> bool:
        view = self._connections.get(connection_id)
        return (
            view is not None
            and bool(view.scoped)
            and bool(scoped_readings(view, model, self._known_models))
        )

    def model_key(self, connection_id: str, model: str) -> PreferenceKey | None:
        """The key of a connection for a candidate of `model`."""
        if not self._binds(connection_id, model):
            return self.key(connection_id)
        keys = self._model_keys
        pair = (connection_id, model)
        if pair not in keys:
            view = self._connections[connection_id]
            keys[pair] = model_preference_key(
                view, model, self._config, self._now, self._known_models
            )
        return keys[pair]

    def key(self, connection_id: str) -> PreferenceKey | None:
        """The preference key of a connection of this decision (None: not known)."""
        keys = self._keys
        if connection_id in keys:
            return keys[connection_id]
        view = self._connections.get(connection_id)
        key = None if view is None else preference_key(view, self._config, self._now)
        keys[connection_id] = key
        return key

    def ordered(self, connection_ids: list[str], model: str | None = None) -> list[str]:
        """The passing plan connections of one entry (of a candidate of `model`), in order
        of preference."""
        if len(connection_ids) < 2:
            return connection_ids
        given = tuple(connection_ids)
        scoped = model is not None and any(self._binds(cid, model) for cid in given)
        cache_key = (given, model if scoped else None)
        order = self._orders.get(cache_key)
        if order is None:
            if scoped:
                assert model is not None
                keys = {cid: self.model_key(cid, model) for cid in given}
                order = list(preference_order(given, keys))
            else:
                for connection_id in given:
                    self.key(connection_id)
                order = list(preference_order(given, self._keys))
            self._orders[cache_key] = order
        return order


# --------------------------------------------------------------------------- prose


def span_text(seconds: float) -> str:
    """A time until a reset for people, in its largest whole unit ("6 d", "19 h",
    "25 min", "40 s"); rounded down, so it never promises more time than there is."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def key_text(key: PreferenceKey | None, now: datetime) -> str:
    """One connection's key as a phrase ("resets in 19 h with 40 % left")."""
    if key is None:
        return "no known reset"
    return (
        f"resets in {span_text((key.reset_at - now).total_seconds())} "
        f"with {key.remaining_percent} % left"
    )


def preference_sentence(
    ordered_ids: Sequence[str], keys: Mapping[str, PreferenceKey | None], now: datetime
) -> str | None:
    """Why the first of an entry's plan connections comes first, beside the others
    ("claude-max-2 first: resets in 19 h with 40 % left; claude-max-1 resets in 6 d
    with 90 % left"); None for fewer than two connections."""
    if len(ordered_ids) < 2:
        return None
    first, *others = ordered_ids
    first_key = keys.get(first)
    if first_key is None:
        # Deliberately said: with no known reset anywhere, the gateway's order stands.
        return f"{first} first: no connection has a known reset, so the original order stands"
    parts = [f"{first} first: {key_text(first_key, now)}"]
    for other in others:
        other_key = keys.get(other)
        text = key_text(other_key, now)
        if other_key == first_key:
            text += " (a tie: the given order stands)"
        elif other_key is not None and other_key.reset_at == first_key.reset_at:
            text += " (the same reset: more left goes first)"
        parts.append(f"{other} {text}")
    return "; ".join(parts)
