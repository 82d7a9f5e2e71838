"""A map bounded by bytes as well as by count, the least recently used entry out first:
the per-process caches of the pool hot path (ladder.services, ladder.pool_answers).

An entry's size is the caller's accounting (a length it already has, or an estimate from
a few lengths), so an insert costs O(1) whatever the value holds; nothing walks the
value. A count bound alone let a few large entries take gigabytes."""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

# An entry may take at most this fraction of the bound (1/8): larger ones are not kept,
# so one huge answer can never flush the cache, and the bound holds at least 8 of them.
ENTRY_SHARE = 8


class ByteBoundedLRU(Generic[K, V]):
    """At most `max_entries` entries whose accounted sizes add up to at most the
    `max_bytes` each insert is given. Writes take a lock; reads do not (a hit is on the
    hot path): OrderedDict's C operations are atomic under the GIL, and one racing an
    eviction only fails to move an entry that is gone."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value under `key`, now the most recently used; None if absent."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        # An entry evicted (or being evicted) by another thread meanwhile is not moved.
        with contextlib.suppress(KeyError, RuntimeError):
            self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: K, value: V, size: int, max_bytes: int) -> bool:
        """Keep `value` under `key`, accounted as `size` bytes, evicting the least
        recently used entries until the total is within `max_bytes`. An entry larger
        than `max_bytes // ENTRY_SHARE` is not kept (False), and what `key` held is dropped."""
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._bytes -= previous[1]
            if size > max_bytes // ENTRY_SHARE:
                return False
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > max_bytes or len(self._entries) > self.max_entries:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted
        return True

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    @property
    def accounted_bytes(self) -> int:
        """The sum of the kept entries' sizes."""
        return self._bytes

    def in_use_order(self) -> list[K]:
        """The keys, least recently used first (a copy)."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
