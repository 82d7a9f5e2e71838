"""The per-process caches of the pool hot path (ladder.services, ladder.api.pool_answers):
cachetools' LRU map, bounded by bytes through its size function.

An entry's size is the caller's accounting (a length it already has, or an estimate from
a few lengths), so an insert costs O(1) whatever the value holds; nothing walks the
value. A count bound alone let a few large entries take gigabytes; the count bound is
kept by charging every entry at least `max_bytes / max_entries`."""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from cachetools import LRUCache

K = TypeVar("K")
V = TypeVar("V")

# An entry may take at most this fraction of the bound (1/8): larger ones are not kept,
# so one huge answer can never flush the cache, and the bound holds at least 8 of them.
ENTRY_SHARE = 8


class ByteBoundedLRU(Generic[K, V]):
    """At most `max_entries` entries whose accounted sizes add up to at most the
    `max_bytes` each insert is given (a bound that changes starts the map afresh).
    cachetools' maps are not thread-safe, reads included (a hit reorders): one lock."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: LRUCache[K, tuple[V, int]] = self._new(0)

    def _new(self, max_bytes: int) -> LRUCache[K, tuple[V, int]]:
        floor = max_bytes / self.max_entries

        def charged(entry: tuple[V, int]) -> float:
            return max(entry[1], floor)

        return LRUCache(maxsize=max_bytes, getsizeof=charged)

    def get(self, key: K) -> V | None:
        """The value under `key`, now the most recently used; None if absent."""
        with self._lock:
            entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: K, value: V, size: int, max_bytes: int) -> bool:
        """Keep `value` under `key`, accounted as `size` bytes, evicting the least
        recently used entries until the total is within `max_bytes`. An entry larger
        than `max_bytes // ENTRY_SHARE` is not kept (False), and what `key` held is dropped."""
        with self._lock:
            if self._entries.maxsize != max_bytes:
                self._entries = self._new(max_bytes)
            self._entries.pop(key, None)
            if size > max_bytes // ENTRY_SHARE:
                return False
            self._entries[key] = (value, size)
        return True

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    @property
    def accounted_bytes(self) -> int:
        """The sum of the kept entries' sizes."""
        with self._lock:
            return sum(size for _, size in self._entries.values())

    def kept_keys(self) -> list[K]:
        """The kept keys (a copy)."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
