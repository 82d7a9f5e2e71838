"""Names an operator types (providers, auth types) against the names already in use:
a near miss of a known name ("oath" for "oauth", "kimmi" for "kimi") is almost always a
typo, and a typo here is silent: the entry matches no connection. Names are compared as
the services store them (trimmed, lower-cased), so "Kimi" is "kimi", not a miss of it.
Pure: no ORM."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

# difflib's ratio from which a name counts as a near miss (case is ignored first).
NEAR_MISS_CUTOFF = 0.8


def did_you_mean(typed: str, known: Iterable[str]) -> str | None:
    """The known name `typed` most likely meant, or None when `typed` is itself known
    (after trimming and lower-casing, as every write path normalises it) or close to none."""
    by_folded: dict[str, str] = {}
    for name in sorted(set(known)):
        by_folded.setdefault(name.strip().casefold(), name)
    folded = typed.strip().casefold()
    if not folded or folded in by_folded:
        return None
    matches = difflib.get_close_matches(folded, list(by_folded), n=1, cutoff=NEAR_MISS_CUTOFF)
    return by_folded[matches[0]] if matches else None


@dataclass(frozen=True, slots=True)
class KnownNames:
    """The providers and auth types in use (the curated catalog's, and the registered
    connections'): the catalog form offers them, and questions a near miss of one."""

    providers: tuple[str, ...] = ()
    auth_types: tuple[str, ...] = ()

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str | None]]) -> KnownNames:
        """From (provider, auth type) pairs; an empty auth type is no name."""
        pairs = list(pairs)
        return cls(
            providers=tuple(sorted({provider for provider, _ in pairs})),
            auth_types=tuple(sorted({auth for _, auth in pairs if auth})),
        )
