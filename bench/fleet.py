"""A fleet of shipped-client gateways against the production server (issue #34, "Targets").

On PostgreSQL, the demo-sized world (200 candidates, LiteLLM's full price map), served by
the production command (gunicorn with uvicorn's worker class on `omniroute_admin.asgi`).
For each fleet size N (`--fleets 5,10,20,30`): N gateway processes, each the real
`omniroute_client.OmniRouteClient` (its decision cache, change feed and batched spend; its
own spool file), serve `--rate` simulated requests per second each for `--duration`
seconds: every request asks `client.pool()` (auto/thrifty and auto/subscription in turn)
and reports its spend (a unique `request_id`) through the client. Meanwhile this process
writes a reading every `--interval` seconds that flips a plan connection in and out of
both pools. Measured per N:

- added: the time inside `client.pool()` per request, p50 / p99 over every request of
  every gateway (target p99 <= 1 ms);
- propagation: from the write's answer (its commit is just before) to each gateway's
  request path getting a decision with the connection's new membership, every write,
  gateway and pool it moved (target p99 <= 250 ms; a write some gateway never saw before
  the next one counts as missed);
- spend: after each client's `close()`, the ledger holds each reported `request_id`
  exactly once;
- the server's CPU per gateway request (its workers' user + system time over the run,
  spend batches, feed polls and the writes included), beside a per-request ask's: N
  processes asking `GET /api/v1/pools/<auto id>` at the same rate without the client
  (`--asks-duration` seconds), as a ratio.

The largest N meeting the three targets, with no request failed (a `pool()` that raised:
the client's fail modes), is printed; the script stops after the first N that misses one
(`--keep-going` runs every size). Clients and server share the machine,
so the load average is printed beside every row. Only 127.0.0.1 is talked to.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/omniroute_bench \\
        .venv/bin/python bench/fleet.py [--fleets 5,10,20,30] [--duration 25] \\
        [--rate 100] [--interval 2] [--asks-duration 10] [--workers 1]

The database is emptied first: its name must contain "bench". The gateways' own output
goes to var/bench/fleet-gateways.log, the server's to var/bench/fleet.log.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from math import inf
from pathlib import Path
from typing import IO, Any

BENCH_DIR = Path(__file__).resolve().parent
CLIENT_SRC = BENCH_DIR.parent / "integrations" / "python-client" / "src"
AUTO_IDS = ("auto/thrifty", "auto/subscription")
READY_SECONDS = 60  # for every gateway of a fleet to start, follow the feed and warm up
EXIT_SECONDS = 90  # past the run, for every gateway to close (flush its spend) and exit


# --- the gateway processes (no Django here: each is a gateway host of its own) -------------


def holds(candidates: list[dict[str, Any]], connection_id: str) -> bool:
    """Whether a pool answer's candidates serve through `connection_id`."""
    return any(
        entry.get("connection_id") == connection_id
        or connection_id in (entry.get("allowed_connection_ids") or ())
        for entry in candidates
    )


def schedule(start: float, rate: float, count: int) -> Any:
    """Open-loop pacing: the i-th request is due at start + i / rate (a late process
    catches up rather than stretching the run). Yields (i, due)."""
    for index in range(count):
        due = start + index / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        yield index, due


def await_start() -> float:
    """Say ready, then wait for the parent's start instant (time.monotonic, shared by the
    processes of one machine)."""
    print("ready", flush=True)
    return float(sys.stdin.readline())


def run_gateway(config: dict[str, Any]) -> dict[str, Any]:
    """One gateway: the shipped client, `rate` requests per second for `duration` s."""
    sys.path.insert(0, str(CLIENT_SRC))
    from omniroute_client import OmniRouteClient

    options: dict[str, Any] = {"spool_path": config["spool"]}
    if config["refresh_jitter"] is not None:
        options["refresh_jitter_seconds"] = config["refresh_jitter"]
    if config["flush_interval"] is not None:
        options["flush_interval"] = config["flush_interval"]
    client = OmniRouteClient(config["base"], config["token"], **options)
    flip = config["flip"]
    deadline = time.monotonic() + READY_SECONDS
    while not client.feed_live:  # the feed's first answer retires what was kept before it
        if time.monotonic() > deadline:
            raise SystemExit("the change feed never answered")
        time.sleep(0.01)
    last: dict[str, Any] = {}
    member: dict[str, bool] = {}
    for auto_id in AUTO_IDS:
        last[auto_id] = client.pool(auto_id)
        member[auto_id] = holds(last[auto_id].candidates, flip)
    start = await_start()
    cpu_started = time.process_time()  # this gateway's own CPU, all its threads
    added_us: list[int] = []
    late_ms: list[float] = []
    changes: dict[str, list[tuple[float, bool]]] = {auto_id: [] for auto_id in AUTO_IDS}
    failed: dict[str, int] = {}  # requests the client answered with an error, by its type
    request_path_trips: list[float] = []  # when a request was not served from the cache
    reported = 0
    for index, due in schedule(start, config["rate"], round(config["rate"] * config["duration"])):
        late_ms.append((time.monotonic() - due) * 1000)
        auto_id = AUTO_IDS[index % 2]
        # Served without a round trip of its own: kept, or the refresh's refetch awaited.
        served = client.stats["hits"] + client.stats["refresh_awaited"]
        began = time.perf_counter()
        try:
            decision = client.pool(auto_id)
        except Exception as error:  # the client's fail modes (subscription fails closed)
            added_us.append(round((time.perf_counter() - began) * 1e6))
            if type(error).__name__ not in failed:
                print(f"gateway {config['index']}: {error!r}", file=sys.stderr, flush=True)
            failed[type(error).__name__] = failed.get(type(error).__name__, 0) + 1
            continue  # a request not served: no spend
        added_us.append(round((time.perf_counter() - began) * 1e6))
        seen_at = time.monotonic()
        if client.stats["hits"] + client.stats["refresh_awaited"] == served:
            request_path_trips.append(seen_at)  # a round trip on this request
        if decision is not last[auto_id]:
            last[auto_id] = decision
            now_member = holds(decision.candidates, flip)
            if now_member != member[auto_id]:
                member[auto_id] = now_member
                changes[auto_id].append((seen_at, now_member))
        connection_id, provider, model = config["spend"][index % 2]
        client.report_spend(
            {
                "request_id": f"{config['run']}-{config['index']}-{index}",
                "connection_id": connection_id,
                "provider": provider,
                "model": model,
                "cost_usd": None,
                "input_tokens": 1000 + index % 500,
                "output_tokens": 200 + index % 100,
            },
            may_cross_budget=index % 2 == 0,  # the plan-included half never crosses one
        )
        reported += 1
    drained = client.close(timeout=EXIT_SECONDS / 2)
    cpu_ms = (time.process_time() - cpu_started) * 1000
    return {
        "added_us": added_us,
        "late_ms_p99": percentile(late_ms, 0.99),
        "changes": changes,
        "request_path_trips": request_path_trips,
        "reported": reported,
        "failed": failed,
        "cpu_ms": cpu_ms,
        "drained": drained,
        "metrics": {k: v for k, v in client.metrics().items() if isinstance(v, int | float)},
    }


def run_asker(config: dict[str, Any]) -> dict[str, Any]:
    """A gateway without the client: a pool request per simulated request."""
    import httpx

    headers = {"Authorization": f"Bearer {config['token']}"}
    with httpx.Client(base_url=config["base"] + "/api/v1", headers=headers, timeout=10) as http:
        for auto_id in AUTO_IDS:
            http.get(f"/pools/{auto_id}")  # the connection opened, as the client's is
        start = await_start()
        statuses: dict[str, int] = {}
        took_ms: list[float] = []
        count = round(config["rate"] * config["duration"])
        for index, _ in schedule(start, config["rate"], count):
            if time.monotonic() > start + config["duration"]:
                break  # a server slower than the rate asked: what it answered in time
            began = time.perf_counter()
            try:
                status = str(http.get(f"/pools/{AUTO_IDS[index % 2]}").status_code)
            except httpx.HTTPError as error:
                status = type(error).__name__
            took_ms.append((time.perf_counter() - began) * 1000)
            statuses[status] = statuses.get(status, 0) + 1
    return {"statuses": statuses, "p99_ms": percentile(took_ms, 0.99), "asked": count}


def percentile(values: list[float] | list[int], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))])


# --- the parent: the world, the server, the writes, the figures ----------------------------


@dataclass
class Write:
    sent: float
    answered: float
    member: bool  # the flipped connection in its pools after this write


class Writer:
    """A reading every `interval` seconds flipping `connection_id` out of its pools (1 %
    left) and back in (90 %), on its own thread while started; each write's instants.
    One writer serves every run, so it knows the connection's state across them."""

    def __init__(self, common: Any, token: str, interval: float, connection_id: str) -> None:
        self.common = common
        self.token = token
        self.interval = interval
        self.connection_id = connection_id
        self.member = True  # the world's reading (94 % left) keeps it in
        self.writes: list[Write] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.writes, self.failures = [], 0
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flip()

    def flip(self) -> None:
        remaining = 1.0 if self.member else 90.0
        sent = time.monotonic()
        status, _, body = self.common.http(
            "POST",
            f"/api/v1/connections/{self.connection_id}/readings",
            token=self.token,
            body={"remaining_percent": remaining},
            timeout=30,
        )
        answered = time.monotonic()
        if status != 201:
            self.failures += 1
            print(f"  the reading answered {status}: {body[:200]!r}")
            return
        self.member = not self.member
        self.writes.append(Write(sent, answered, self.member))


def spawn(role: str, configs: list[dict[str, Any]], log: IO[bytes]) -> list[subprocess.Popen[str]]:
    processes = [
        subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), role, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        for config in configs
    ]
    deadline = time.monotonic() + READY_SECONDS
    for process in processes:
        assert process.stdout is not None
        readable, _, _ = select.select([process.stdout], [], [], deadline - time.monotonic())
        if not readable or process.stdout.readline().strip() != "ready":
            for other in processes:
                other.kill()
            raise SystemExit(f"a {role} did not start: see var/bench/fleet-gateways.log")
    return processes


def release(processes: list[subprocess.Popen[str]], start: float) -> None:
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(f"{start!r}\n")
        process.stdin.flush()


def collect(processes: list[subprocess.Popen[str]], until: float) -> list[dict[str, Any]]:
    results = []
    for process in processes:
        try:
            out, _ = process.communicate(timeout=max(1.0, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        if process.returncode != 0 or not out.strip():
            raise SystemExit(f"a gateway exited with {process.returncode}: see its log")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def server_cpu(common: Any) -> float:
    return float(sum(common.server_cpu_ms().values()))


def run_phase(
    common: Any, role: str, configs: list[dict[str, Any]], writer: Writer, duration: float
) -> tuple[list[dict[str, Any]], Cpu, float, float]:
    """Start the processes, then the traffic and the writes together for `duration` s;
    returns their results, the server's CPU, the run's start and the load average (one
    minute) at its end."""
    with (common.LOG_DIR / "fleet-gateways.log").open("ab") as log:
        processes = spawn(role, configs, log)
    cpu_before, measured_from = server_cpu(common), time.monotonic()
    start = measured_from + 0.2
    release(processes, start)
    writer.start()
    time.sleep(max(0.0, start + duration - time.monotonic()))
    writer.stop()
    results = collect(processes, start + duration + EXIT_SECONDS)
    cpu = Cpu(server_cpu(common) - cpu_before, time.monotonic() - measured_from)
    return results, cpu, start, os.getloadavg()[0]


@dataclass
class Cpu:
    """The server workers' CPU over a run (ms) and the run's length (s, start-up of the
    processes excluded, their close included)."""

    ms: float
    seconds: float

    def net_of(self, baseline: Cpu | None) -> float:
        """What is left once the rate of `baseline` (the writes alone) is taken out."""
        if baseline is None:
            return self.ms
        return self.ms - baseline.ms / baseline.seconds * self.seconds


def writes_alone(common: Any, writer: Writer, duration: float) -> Cpu:
    """The server's CPU with nothing but the writes (and their change feed) for
    `duration` seconds: the part of every run that is not the gateways'."""
    cpu_before, measured_from = server_cpu(common), time.monotonic()
    writer.start()
    time.sleep(duration)
    writer.stop()
    return Cpu(server_cpu(common) - cpu_before, time.monotonic() - measured_from)


def propagation(
    writes: list[Write], results: list[dict[str, Any]], moved: list[str], end: float
) -> tuple[list[float], list[float], int]:
    """Per write, gateway and moved pool: ms from the write's answer (and from its
    sending) to that gateway's request path getting the new membership; and how many
    never did before the next write (or the run's end)."""
    from_answer: list[float] = []
    from_sent: list[float] = []
    missed = 0
    for number, write in enumerate(writes):
        if write.sent > end - 1.0:
            break  # too close to the end to be seen: not counted
        window_end = writes[number + 1].sent if number + 1 < len(writes) else end
        for result in results:
            for auto_id in moved:
                seen = next(
                    (
                        at
                        for at, member in result["changes"][auto_id]
                        if write.sent <= at < window_end and member == write.member
                    ),
                    None,
                )
                if seen is None:
                    missed += 1
                else:
                    from_answer.append((seen - write.answered) * 1000)
                    from_sent.append((seen - write.sent) * 1000)
    return from_answer, from_sent, missed


def since_write(writes: list[Write], times: list[float]) -> list[float]:
    """For each instant, ms since the last write's answer before it (inf: none)."""
    return [
        min(((at - write.answered) * 1000 for write in writes if write.answered <= at), default=inf)
        for at in times
    ]


def landed(prefix: str, gateways: int) -> tuple[int, int, list[int]]:
    """Ledger rows whose request_id starts with `prefix`: all, distinct ids, per gateway."""
    from django.db.models import Count

    from ladder.models import SpendEntry

    rows = SpendEntry.objects.filter(request_id__startswith=prefix + "-")
    total = rows.count()
    distinct = rows.aggregate(n=Count("request_id", distinct=True))["n"]
    per_gateway = [
        rows.filter(request_id__startswith=f"{prefix}-{index}-").count()
        for index in range(gateways)
    ]
    return total, distinct, per_gateway


def pool_members(common: Any, token: str, connection_id: str) -> dict[str, bool]:
    members = {}
    for auto_id in AUTO_IDS:
        status, _, body = common.http("GET", f"/api/v1/pools/{auto_id}", token=token)
        if status != 200:
            raise SystemExit(f"{auto_id} answered {status}: {body[:200]!r}")
        members[auto_id] = holds(json.loads(body)["candidates"], connection_id)
    return members


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


@dataclass
class Fleet:
    """What every fleet size's run shares."""

    common: Any
    args: argparse.Namespace
    token: str
    writer: Writer
    spend: list[list[str]]
    moved: list[str]  # the pools the write moves
    baseline: Cpu | None  # the server's CPU with the writes alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleets", default="5,10,20,30", help="gateway counts, in order")
    parser.add_argument("--duration", type=float, default=25, help="seconds per fleet")
    parser.add_argument("--rate", type=float, default=100, help="requests/s per gateway")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between writes")
    parser.add_argument("--asks-duration", type=float, default=10, help="0: no per-request run")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument(
        "--refresh-jitter",
        type=float,
        default=None,
        help="the client's refresh_jitter_seconds (default: the client's own, 0.05)",
    )
    parser.add_argument(
        "--flush-interval",
        type=float,
        default=None,
        help="the client's flush_interval, how often it sends spend (default: its own, 0.2)",
    )
    parser.add_argument("--keep-going", action="store_true", help="run every size")
    args = parser.parse_args()
    fleets = [int(size) for size in args.fleets.split(",")]

    import common  # sets up Django; the gateway processes never import it

    print(f"load average before the world: {load_average()}")
    world = common.demo_world(args.candidates)
    token = world["token"]
    flip = common.FLIP_CONNECTION
    server = common.start_server("asgi", workers=args.workers, threads=1, log="fleet")
    common.LOG_DIR.mkdir(parents=True, exist_ok=True)
    rows: list[str] = []
    verdicts: dict[int, bool] = {}
    try:
        print(f"machine reference: {common.machine_reference():.3f} s")
        print(
            f"production command, {args.workers} worker(s), {args.candidates} candidates; "
            f"each gateway {args.rate:.0f} requests/s for {args.duration:.0f} s; "
            f"a write every {args.interval} s flips {flip}; the client's refresh jitter "
            f"{'its default' if args.refresh_jitter is None else f'{args.refresh_jitter} s'}, "
            f"flush interval "
            f"{'its default' if args.flush_interval is None else f'{args.flush_interval} s'}"
        )
        # Which pools the write moves: flip it out and back in, reading the pools each time.
        writer = Writer(common, token, args.interval, flip)
        before = pool_members(common, token, flip)
        writer.flip()
        after = pool_members(common, token, flip)
        writer.flip()
        moved = [auto_id for auto_id in AUTO_IDS if before[auto_id] != after[auto_id]]
        if not moved or pool_members(common, token, flip) != before:
            raise SystemExit(f"the write moves no pool: {before} -> {after}")
        print(f"the write moves {', '.join(moved)}")
        baseline = None
        if args.asks_duration > 0:
            baseline = writes_alone(common, writer, args.asks_duration)
            print(
                f"the writes alone: server CPU {baseline.ms:.0f} ms in {baseline.seconds:.1f} s "
                f"(taken out of each run's CPU per request in 'net'); load average "
                f"{load_average()}"
            )
        spend = [list(common.PAID_SPEND), list(common.PLAN_SPEND)]
        fleet = Fleet(common, args, token, writer, spend, moved, baseline)
        for size in fleets:
            row, verdicts[size] = measure(fleet, size)
            rows.append(row)
            if not verdicts[size] and not args.keep_going:
                break
    finally:
        common.stop_server(server)
    print()
    print(
        f"{'N':>3} {'added p50/p99 ms':>17} {'trips':>6} {'failed':>6} {'prop p50/p99/max ms':>20} "
        f"{'missed':>6} {'spend landed':>17} {'cpu/req ms':>10} {'ask':>6} {'ratio':>6} "
        f"{'net':>6} {'load':>5}"
    )
    for line in rows:
        print(line)
    met = [size for size, ok in verdicts.items() if ok]
    print(
        f"largest N meeting added p99 <= 1 ms, spend landed once, propagation p99 <= 250 ms "
        f"(and no request failed): "
        f"{max(met) if met else 'none'} (target >= 20: "
        f"{'met' if met and max(met) >= 20 else 'NOT met'})"
    )
    print(common.server_log_summary("fleet"))


def measure(fleet: Fleet, size: int) -> tuple[str, bool]:
    """One fleet size: the gateways' run, then the per-request asks' run; its row and
    whether it met the three targets."""
    common, args, writer = fleet.common, fleet.args, fleet.writer
    run = f"fleet-{size}-{time.time_ns()}"
    print(f"\nN = {size}: load average {load_average()}")
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as spools:
        configs = [
            {
                "base": common.BASE,
                "token": fleet.token,
                "flip": writer.connection_id,
                "spend": fleet.spend,
                "rate": args.rate,
                "duration": args.duration,
                "run": run,
                "index": index,
                "spool": str(Path(spools) / f"spool-{index}.sqlite3"),
                "refresh_jitter": args.refresh_jitter,
                "flush_interval": args.flush_interval,
            }
            for index in range(size)
        ]
        results, cpu, start, load = run_phase(common, "gateway", configs, writer, args.duration)
    added = [us / 1000 for result in results for us in result["added_us"]]
    p99 = percentile(added, 0.99)
    worst = max(percentile(result["added_us"], 0.99) / 1000 for result in results)
    trip_times = [at for result in results for at in result["request_path_trips"]]
    after_write = sum(age <= 1000 for age in since_write(writer.writes, trip_times))
    late = max(result["late_ms_p99"] for result in results)
    from_answer, from_sent, missed = propagation(
        writer.writes, results, fleet.moved, start + args.duration
    )
    prop = [percentile(from_answer, 0.5), percentile(from_answer, 0.99)]
    prop.append(max(from_answer, default=float("nan")))
    reported = sum(result["reported"] for result in results)
    failed: dict[str, int] = {}
    for result in results:
        for kind, count in result["failed"].items():
            failed[kind] = failed.get(kind, 0) + count
    total, distinct, per_gateway = landed(run, size)
    drained = all(result["drained"] for result in results)
    once = (
        drained
        and total == distinct == reported
        and per_gateway == [result["reported"] for result in results]
    )
    cpu_per = cpu.ms / reported
    net_per = cpu.net_of(fleet.baseline) / reported
    counters = {
        name: sum(result["metrics"].get(name, 0) for result in results)
        for name in (
            "hits",
            "refresh_awaited",
            "fetches",
            "not_modified",
            "reports_sent",
            "reports_retried",
        )
    }
    print(
        f"  client: {len(added)} requests, added p50 {statistics.median(added):.3f} ms, "
        f"p99 {p99:.3f} ms (worst gateway's p99 {worst:.3f} ms, max {max(added):.1f} ms); "
        f"{len(trip_times)} round trips on the request path ({after_write} within 1 s after "
        f"a write); pacing p99 late {late:.1f} ms (worst gateway)"
    )
    fleet_cpu = sum(result["cpu_ms"] for result in results)
    print(
        f"  the gateways' own CPU: {fleet_cpu / len(added):.3f} ms per request, "
        f"{fleet_cpu / cpu.seconds / 1000:.2f} cores for the fleet (this host has {os.cpu_count()})"
    )
    print(
        f"  client counters (all gateways): {counters}; requests the client failed: "
        f"{failed or 'none'}"
    )
    print(
        f"  writes: {len(writer.writes)} ({writer.failures} failed), the write's own p99 "
        f"{percentile([(w.answered - w.sent) * 1000 for w in writer.writes], 0.99):.0f} ms; "
        f"propagation from its answer p50 {prop[0]:.0f} / p99 {prop[1]:.0f} / max "
        f"{prop[2]:.0f} ms, from its sending p99 {percentile(from_sent, 0.99):.0f} ms "
        f"({len(from_answer)} sightings, {missed} missed)"
    )
    print(
        f"  spend: {reported} reported, {total} rows ({distinct} distinct ids), "
        f"every client drained on close: {drained}"
    )
    print(
        f"  server CPU {cpu.ms:.0f} ms in {cpu.seconds:.1f} s ({cpu.ms / cpu.seconds / 10:.0f} % "
        f"of a core): {cpu_per:.3f} ms per gateway request, {net_per:.3f} net of the writes "
        f"alone; load average {load:.2f}"
    )
    ask_per = ask_net = float("nan")
    if args.asks_duration > 0:
        ask_configs = [
            {
                "base": common.BASE,
                "token": fleet.token,
                "rate": args.rate,
                "duration": args.asks_duration,
            }
            for _ in range(size)
        ]
        asks, ask_cpu, _, ask_load = run_phase(
            common, "ask", ask_configs, writer, args.asks_duration
        )
        statuses: dict[str, int] = {}
        for result in asks:
            for status, count in result["statuses"].items():
                statuses[status] = statuses.get(status, 0) + count
        answered = sum(statuses.values())
        ask_per = ask_cpu.ms / answered
        ask_net = ask_cpu.net_of(fleet.baseline) / answered
        print(
            f"  per-request asks: {answered} of {sum(result['asked'] for result in asks)} in "
            f"{ask_cpu.seconds:.1f} s (statuses {statuses}), worst asker's p99 "
            f"{max(result['p99_ms'] for result in asks):.1f} ms; server CPU {ask_cpu.ms:.0f} "
            f"ms: {ask_per:.3f} ms per ask, {ask_net:.3f} net; load average {ask_load:.2f}"
        )
    met = p99 <= 1.0 and once and missed == 0 and prop[1] <= 250 and not failed
    print(f"  N = {size}: {'met' if met else 'NOT met'}")
    row = (
        f"{size:>3} {statistics.median(added):>8.3f}/{p99:<8.3f} {len(trip_times):>6} "
        f"{sum(failed.values()):>6} "
        f"{prop[0]:>6.0f}/{prop[1]:>4.0f}/{prop[2]:<8.0f} {missed:>6} "
        f"{f'{total}/{reported}' + (' once' if once else ' NO'):>17} {cpu_per:>10.3f} "
        f"{ask_per:>6.3f} {cpu_per / ask_per:>6.2f} {net_per / ask_net:>6.2f} {load:>5.2f}"
    )
    return row, met


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in ("gateway", "ask"):
        role_config = json.loads(sys.argv[2])
        outcome = run_gateway(role_config) if sys.argv[1] == "gateway" else run_asker(role_config)
        print(json.dumps(outcome), flush=True)
    else:
        main()
