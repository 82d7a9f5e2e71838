"""The production server's worker class: uvicorn's, with its connections balanced across
the workers of one gunicorn master (docs/SCALING.md, "Several workers on one host").

    gunicorn omniroute_admin.asgi:application -k omniroute_admin.workers.UvicornWorker

The workers share one listening socket, and the worker the kernel wakes first accepts
every connection waiting (uvloop accepts until the queue is empty). A gateway holds its
connections open, so where they land is where its load stays: two connections opened at
once went to the same worker in most runs of the benchmark, one process and one core
serving both while the others idled (bench/README.md, session 10).

So each worker publishes how many connections it holds in a table the master shares with
every worker it forks (a slot a worker: a heartbeat and a count), and a worker that holds
more than its fair share (`over_share`) asks the client to reconnect once its answer is
sent (`Connection: close` on that answer, which uvicorn honours by closing after it); the
client's next connection goes to whichever worker accepts it, most likely an idle one,
and a worker within its share never closes one. One worker alone never does either. A
worker whose heartbeat is older than STALE_SECONDS is gone and not counted.

This module is imported by the gunicorn master (it names the worker class) before any
application is loaded: no Django here."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.sharedctypes import RawArray
from typing import Any

from gunicorn.arbiter import Arbiter
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker as _UvicornWorker

# Workers of one master at most (gunicorn's --workers; more is refused at start).
MAX_SLOTS = 64
# How often a worker publishes its count, on its loop, whatever its traffic.
PUBLISH_SECONDS = 0.25
# A slot not published for this long is a worker gone (killed, or stuck for so long that
# its connections are not worth counting).
STALE_SECONDS = 2.0
# A slot the master has just handed a worker it forked, before the worker's first
# heartbeat: not handed again for this long.
CLAIM_SECONDS = 30.0


def over_share(mine: int, counts: Sequence[int]) -> bool:
    """Whether a worker holding `mine` connections, of the live workers' `counts` (its own
    included), holds more than its fair share: more than the total divided by the
    workers, rounded up. 2 connections on 3 workers: a share of 1, so a worker with both
    hands one on; 16 on 3: a share of 6 (6, 5, 5 is balanced)."""
    if len(counts) < 2:
        return False
    return mine > math.ceil(sum(counts) / len(counts))


class SlotTable:
    """The counts of the workers of one master, in memory shared with its children:
    per slot, the worker's last heartbeat (time.monotonic, one clock for every process
    of the host) and how many connections it holds."""

    def __init__(self, size: int = MAX_SLOTS, clock: Callable[[], float] = time.monotonic) -> None:
        self.size = size
        self.clock = clock
        # Per slot a heartbeat and a count; then how many slots were ever handed out (the
        # scans stop there: a host's few workers, not MAX_SLOTS, per answer).
        self._values: Any = RawArray("d", 2 * size + 1)
        self._claimed: dict[int, float] = {}  # the master's: slot -> when it handed it

    def claim(self) -> int:
        """A free slot for a worker about to be forked (in the master): one with no live
        heartbeat that was not handed out in the last CLAIM_SECONDS."""
        now = self.clock()
        for slot in range(self.size):
            recent = now - self._claimed.get(slot, -math.inf) < CLAIM_SECONDS
            if not recent and not self._live(slot, now):
                self._claimed[slot] = now
                self._values[2 * slot + 1] = 0.0
                self._values[2 * self.size] = max(self._values[2 * self.size], slot + 1)
                return slot
        raise RuntimeError(f"more than {self.size} workers: no slot left to balance them")

    def publish(self, slot: int, connections: int) -> None:
        """A worker's heartbeat and its count (in the worker)."""
        self._values[2 * slot] = self.clock()
        self._values[2 * slot + 1] = float(connections)

    def leave(self, slot: int) -> None:
        """A worker stopping: its slot is no longer live."""
        self._values[2 * slot] = 0.0
        self._values[2 * slot + 1] = 0.0

    def live_counts(self) -> list[int]:
        """The counts of the workers whose heartbeat is recent."""
        now = self.clock()
        values = self._values
        used = int(values[2 * self.size])
        return [int(values[2 * slot + 1]) for slot in range(used) if self._live(slot, now)]

    def _live(self, slot: int, now: float) -> bool:
        beat = self._values[2 * slot]
        return beat > 0 and now - beat < STALE_SECONDS


class Balancer:
    """One worker's side: its slot and the set of connections its server holds."""

    def __init__(self, table: SlotTable, slot: int, connections: set[Any]) -> None:
        self.table = table
        self.slot = slot
        self.connections = connections
        self.closed = 0  # answers sent with `Connection: close` so far

    def publish(self) -> None:
        self.table.publish(self.slot, len(self.connections))

    def should_close(self) -> bool:
        """Whether the answer being sent should close its connection: this worker holds
        more than its share. Publishes this worker's count first."""
        mine = len(self.connections)
        self.table.publish(self.slot, mine)
        # One connection is never over a share (at least one): no scan of the table.
        if mine > 1 and over_share(mine, self.table.live_counts()):
            self.closed += 1
            return True
        return False

    async def keep_publishing(self) -> None:
        while True:
            self.publish()
            await asyncio.sleep(PUBLISH_SECONDS)


# Made in the master when gunicorn loads this worker class, before it forks any worker:
# every worker shares it. None in a process no master of this class started.
_table: SlotTable | None = None
# This worker's, once it serves (None elsewhere: never a closed connection).
balancer: Balancer | None = None


def table() -> SlotTable:
    global _table
    if _table is None:
        _table = SlotTable()
    return _table


class UvicornWorker(_UvicornWorker):
    """uvicorn_worker.UvicornWorker, its connections balanced (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # In the master, before the fork: this worker's slot.
        self.slot = table().claim()

    async def _serve(self) -> None:
        global balancer
        self.config.app = self.wsgi
        server = Server(config=self.config)
        balancer = Balancer(table(), self.slot, server.server_state.connections)
        publishing = asyncio.ensure_future(balancer.keep_publishing())
        self._install_sigquit_handler()
        try:
            await server.serve(sockets=self.sockets)
        finally:
            publishing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await publishing
            balancer.table.leave(self.slot)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)


def closing(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """An answer's headers, with `Connection: close` when this worker is over its share."""
    if balancer is not None and balancer.should_close():
        return [*headers, (b"connection", b"close")]
    return headers
