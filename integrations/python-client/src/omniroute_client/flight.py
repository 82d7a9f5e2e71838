"""Fail fast, decided once: one fetch in flight per key, its outcome shared, and a short
circuit breaker (see README.md, "Failure").

- `SingleFlight`: the first caller of a key fetches; every caller that arrives while it
  runs waits for that one fetch and gets its decision or its exception. A failed fetch
  is therefore paid once per burst, not once per waiter.
- `Breaker`: after `threshold` consecutive failures to reach the control plane it opens
  for `open_seconds`: callers are answered at once from what the client holds (the fail
  mode of their auto id) with no round trip. Then one fetch is let through (half-open);
  its success closes it, its failure opens it again.

Pure of IO; the caller passes `now` (epoch seconds of the client's clock)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Call:
    """One fetch in flight: waiters block on `done`, then read `result` or `error`."""

    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class SingleFlight:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, Call] = {}

    def join(self, key: str) -> tuple[Call, bool]:
        """The call of `key` and whether this caller leads it (must run the fetch and
        `finish` it)."""
        with self._lock:
            call = self._calls.get(key)
            if call is not None:
                return call, False
            call = self._calls[key] = Call()
            return call, True

    def finish(
        self, key: str, call: Call, result: Any = None, error: BaseException | None = None
    ) -> None:
        with self._lock:
            if self._calls.get(key) is call:
                del self._calls[key]
        call.result, call.error = result, error
        call.done.set()

    def in_flight(self) -> int:
        with self._lock:
            return len(self._calls)


class Breaker:
    """Consecutive failures to reach the control plane open it for `open_seconds`."""

    def __init__(self, *, threshold: int = 1, open_seconds: float = 2.0) -> None:
        if threshold < 1 or open_seconds < 0:
            raise ValueError("breaker: threshold >= 1 and open_seconds >= 0")
        self.threshold = threshold
        self.open_seconds = open_seconds
        self.failures = 0
        self.open_until: float | None = None
        self.opened = 0  # how many times it opened (a metric)
        self._trial = False
        self._lock = threading.Lock()

    def allow(self, now: float) -> bool:
        """May a fetch go out now? While open: no. Once the open period has passed: one
        trial at a time (half-open)."""
        with self._lock:
            if self.open_until is None:
                return True
            if now < self.open_until or self._trial:
                return False
            self._trial = True
            return True

    def is_open(self, now: float) -> bool:
        with self._lock:
            return self.open_until is not None and now < self.open_until

    def success(self) -> None:
        with self._lock:
            self.failures, self.open_until, self._trial = 0, None, False

    def failure(self, now: float) -> None:
        with self._lock:
            self.failures += 1
            self._trial = False
            if self.failures >= self.threshold:
                if self.open_until is None or now >= self.open_until:
                    self.opened += 1
                self.open_until = now + self.open_seconds
