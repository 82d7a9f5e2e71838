"""The refresh after the change feed moves, key by key (README.md, "How a decision is
kept").

When the refresh starts (after its jitter delay), every kept decision is retired but
those it will refetch. Each of these is served as it was until its own refetch starts;
from then on it is never served again: a request for that key awaits the one refetch in
flight (no round trip of its own) and shares its outcome, a decision or a failure, and
the refetched decision is served the moment it lands, whatever the other keys' refetches
are doing. A refetch that failed leaves its key to the request path (its fail mode).

Pure of IO and of the clock; the client holds its lock around every call. The flights
are `concurrent.futures.Future`s: a request thread waits on `result()`, a coroutine on
`asyncio.wrap_future`. Each is marked running when made, so a waiter that gives up
(a cancelled coroutine) cannot cancel it for the others."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

# When the feed moves: how many of the most recently used decisions the client holds
# are fetched again, and for how long at most (past it, the rest are retired and
# revalidate on their next request).
REFRESH_KEYS = 16
REFRESH_BUDGET_SECONDS = 0.25
# And the refresh starts after a random delay of up to this many seconds, so that the
# gateways one write reaches at once spread their refetches rather than ask together.
# The delay is propagation given away on purpose: 0.05 s keeps it a fifth of the 250 ms
# target (README.md, "How a decision is kept", for the fleet size it spreads).
REFRESH_JITTER_SECONDS = 0.05


class Refresh:
    """One move's refresh. `before`: the cache generation the kept decisions had when it
    started; `generation` (`before + 1`): the client's generation from then on, under
    which the refetched decisions are kept. A later invalidation (the gateway's own
    event) moves the client's generation past it, and the refresh no longer counts."""

    def __init__(self, keys: Iterable[str], before: int) -> None:
        self.before = before
        self.generation = before + 1
        self.queued = set(keys)  # their refetch has not started: the old decision serves
        self.flights: dict[str, Future[Any]] = {}  # their refetch is in flight

    def serves(self, key: str, generation: int) -> bool:
        """Whether a decision of `key` kept under `generation` may still be served: the
        one from before the move, until its refetch starts."""
        return generation == self.before and key in self.queued

    def start(self, key: str) -> Future[Any]:
        """`key`'s refetch goes out: its old decision is served no more, and requests for
        it await this flight."""
        self.queued.discard(key)
        flight: Future[Any] = Future()
        flight.set_running_or_notify_cancel()
        self.flights[key] = flight
        return flight

    def finish(self, key: str) -> None:
        """`key`'s refetch has landed (its decision is kept) or failed (the request path
        asks again, and meets the breaker): nobody joins its flight any more."""
        self.flights.pop(key, None)
