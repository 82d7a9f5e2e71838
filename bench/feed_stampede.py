"""The pool endpoint's latency with a thousand gateways following the change feed and a
write every 2 s (issue #30, "a feed that does not stampede").

On PostgreSQL, the demo-sized world (200 candidates, LiteLLM's full price map), served by
the production command (gunicorn with uvicorn's worker class on `omniroute_admin.asgi`).
Every `--interval` seconds a reading flips a connection in or out of its pool (a write
that moves the change version); wrk asks `GET /api/v1/pools/auto/thrifty` over 16
connections. Twice: with nobody on the feed, then with `--waiters` long-polls
(`GET /api/v1/changes?after=<v>&wait=25`, each on its own keep-alive connection, from
one asyncio loop in this process) that re-poll as the shipped client does: at once after
a heartbeat, after a random delay of up to `--jitter` seconds after a move (0: at once,
as a naive client would). The pool's p99 with them against without, and how long each
waiter took to learn each write.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/omniroute_bench \\
        .venv/bin/python bench/feed_stampede.py [--waiters 1000] [--duration 20] \\
        [--interval 2] [--jitter 1.0] [--workers 1]

The database is emptied first: its name must contain "bench".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import threading
import time

import common  # sets up Django: before any model

POOL = "/api/v1/pools/auto/thrifty"
CHANGES = "/api/v1/changes"
WAIT = 25


class Swarm:
    """`count` long-polling waiters on one event loop (its own thread)."""

    def __init__(self, token: str, count: int, jitter: float) -> None:
        self.token = token
        self.count = count
        self.jitter = jitter
        self.answers = 0
        self.moves = 0
        self.failures: dict[str, int] = {}
        self.seen: dict[str, list[float]] = {}  # version -> when each waiter learned it
        self.connected = threading.Event()
        self._open = 0
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self, version: str) -> None:
        self._version = version
        self._thread.start()
        if not self.connected.wait(120):
            raise SystemExit(f"only {self._open} of {self.count} waiters connected")

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        tasks = []
        for _ in range(self.count):
            tasks.append(asyncio.ensure_future(self._waiter()))
            await asyncio.sleep(0.002)  # connect at a pace the accept queue takes
        await self._stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _fail(self, what: str) -> None:
        self.failures[what] = self.failures.get(what, 0) + 1

    async def _waiter(self) -> None:
        after = self._version
        writer = None
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", common.PORT)
            self._open += 1
            if self._open == self.count:
                self.connected.set()
            while True:
                request = (
                    f"GET {CHANGES}?after={after}&wait={WAIT} HTTP/1.1\r\n"
                    f"Host: 127.0.0.1\r\nAuthorization: Bearer {self.token}\r\n\r\n"
                )
                writer.write(request.encode())
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                if status != 200:
                    self._fail(str(status))
                    await asyncio.sleep(1)
                    continue
                self.answers += 1
                version = str(json.loads(body)["version"])
                if version != after:
                    self.moves += 1
                    self.seen.setdefault(version, []).append(time.perf_counter())
                    after = version
                    if self.jitter > 0:
                        await asyncio.sleep(random.uniform(0, self.jitter))
        except asyncio.CancelledError:
            pass
        except (OSError, asyncio.IncompleteReadError, ValueError) as error:
            self._fail(type(error).__name__)
        finally:
            if writer is not None:
                writer.close()


class Writer:
    """A write that moves the version every `interval` seconds, on its own thread:
    the moment each new version's write answered, by version."""

    def __init__(self, token: str, interval: float) -> None:
        self.token = token
        self.interval = interval
        self.written: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._round = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            remaining = 1.0 if self._round % 2 == 0 else 90.0
            self._round += 1
            status, _, body = common.http(
                "POST",
                f"/api/v1/connections/{common.FLIP_CONNECTION}/readings",
                token=self.token,
                body={"remaining_percent": remaining},
                timeout=40,
            )
            answered = time.perf_counter()
            if status != 201:
                print(f"  the reading answered {status}: {body[:200]!r}")
                continue
            status, _, body = common.http("GET", f"{CHANGES}?wait=0", token=self.token)
            if status == 200:
                self.written.setdefault(str(json.loads(body)["version"]), answered)


def current_version(token: str) -> str:
    status, _, body = common.http("GET", f"{CHANGES}?wait=0", token=token)
    if status != 200:
        raise SystemExit(f"{CHANGES} answered {status}")
    return str(json.loads(body)["version"])


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def measure(args: argparse.Namespace, token: str, swarm: Swarm | None) -> dict[str, float]:
    writer = Writer(token, args.interval)
    if swarm is not None:
        swarm.start(current_version(token))
    writer.start()
    try:
        options = {"connections": args.connections, "variables": {"BENCH_TOKEN": token}}
        result = common.measured({"p": (POOL, options)}, duration=args.duration)["p"]
    finally:
        writer.stop()
        if swarm is not None:
            swarm.stop()
    result["load"] = os.getloadavg()[0]
    if swarm is not None:
        learned = [
            (seen - writer.written[version]) * 1000
            for version, times in swarm.seen.items()
            if version in writer.written
            for seen in times
        ]
        result["learned"] = learned  # type: ignore[assignment]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiters", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between writes")
    parser.add_argument("--jitter", type=float, default=1.0, help="re-poll delay after a move")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--candidates", type=int, default=200)
    args = parser.parse_args()
    common.require_wrk()

    print(f"load average before the world: {load_average()}")
    world = common.demo_world(args.candidates)
    token = world["token"]
    server = common.start_server("asgi", workers=args.workers, threads=1, log="feed_stampede")
    try:
        print(f"machine reference: {common.machine_reference():.3f} s")
        print(f"production command, {args.workers} worker(s); a write every {args.interval} s")
        alone = measure(args, token, None)
        print(f"  load average after the run alone: {load_average()}")
        swarm = Swarm(token, args.waiters, args.jitter)
        crowded = measure(args, token, swarm)
        print(f"  load average after the run with waiters: {load_average()}")
    finally:
        common.stop_server(server)
    print(common.HEADER)
    print(common.row("GET pools, nobody waiting", alone, alone["rps"]))
    print(common.row(f"GET pools, {args.waiters} waiting", crowded, alone["rps"]))
    learned: list[float] = crowded.pop("learned", [])  # type: ignore[assignment]
    print(
        f"  waiters: {swarm.answers} answers, {swarm.moves} moves seen, "
        f"failures {swarm.failures or 'none'}"
    )
    if learned:
        print(
            f"  a write to each waiter learning it: p50 {statistics.median(learned):.0f} ms, "
            f"p99 {percentile(learned, 0.99):.0f} ms, max {max(learned):.0f} ms "
            f"({len(learned)} answers; a waiter re-polls up to {args.jitter} s after a move)"
        )
    ratio = crowded["p99_ms"] / alone["p99_ms"]
    verdict = "met" if ratio <= 2 else "NOT met"
    print(
        f"pool p99 {alone['p99_ms']:.1f} ms alone, {crowded['p99_ms']:.1f} ms with "
        f"{args.waiters} waiters: {ratio:.2f} x (target <= 2 x: {verdict}); "
        f"load average {alone['load']:.2f} and {crowded['load']:.2f} at the ends"
    )
    print(common.server_log_summary("feed_stampede"))


if __name__ == "__main__":
    main()
