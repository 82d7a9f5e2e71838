"""The hot path under a real gateway's load (issue #14): writes at request rate and
decisions a gateway keeps. On PostgreSQL, the demo-sized world (200 candidates) with
LiteLLM's full price map imported; one server for every phase, wrk on loopback, every
figure also a ratio to `/healthz` of the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/omniroute_bench \\
        .venv/bin/python bench/hot_path.py [--phases mixed,batch,revalidate,feed] \\
        [--duration 10] [--server gunicorn|uvicorn] [--workers 3] [--threads 4]

Phases:
  mixed       /healthz alone; GET pools alone; GET pools while a second wrk reports spend
              (POST /api/v1/spend, a unique request_id each, cost_usd null with tokens,
              three in four on a paid rung with a budget no run reaches, one on a plan rung)
  batch       POST /api/v1/spend/batch, 1,000 entries a request: entries per second
  revalidate  GET pools with If-None-Match of the tag of a first answer (304)
  feed        20 clients long-polling GET /api/v1/changes, one write that moves the
              version, the time from the write's response to each client's answer,
              repeated; then pool throughput with 50 clients waiting on the feed vs none

A phase whose endpoint the server does not have prints "skipped: ... not available".
The database is emptied first: its name must contain "bench".
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import common  # sets up Django: before any model

from ladder.models import SpendEntry

POOL = "/api/v1/pools/auto/thrifty"
SPEND = "/api/v1/spend"
BATCH = "/api/v1/spend/batch"
CHANGES = "/api/v1/changes"
PHASES = ("mixed", "batch", "revalidate", "feed")
# The targets (2 cores, 200 candidates, the full price map; ratios within one run).
TARGETS = {
    "pools_ratio": 0.4,
    "pools_p99_ms": 15.0,
    "spend_ratio": 0.25,
    "spend_p99_ms": 25.0,
    "batch_entries_per_s": 20_000.0,
    "revalidate_ratio": 0.9,
    "propagation_p99_ms": 250.0,
    "waiting_ratio": 0.8,
}


class Run:
    """One server, its token and the figures gathered so far."""

    def __init__(self, args: argparse.Namespace, token: str) -> None:
        self.args = args
        self.token = token
        self.verdicts: list[tuple[str, str, str]] = []  # (what, figure, target verdict)
        self.figures: dict[str, Any] = {}  # every wrk summary and feed figure, by name

    def load(
        self, runs: dict[str, tuple[str, dict[str, Any]]], duration: float | None = None
    ) -> dict[str, dict[str, float]]:
        return common.measured(runs, duration=duration or self.args.duration)

    def wrk_options(self, connections: int, **variables: str) -> dict[str, Any]:
        return {
            "connections": connections,
            "variables": {"BENCH_TOKEN": self.token, **variables},
        }

    def healthz(self) -> dict[str, float]:
        return self.load({"h": ("/healthz", {"connections": self.args.connections})})["h"]

    def verdict(self, what: str, figure: str, met: bool) -> None:
        self.verdicts.append((what, figure, "met" if met else "NOT met"))


def spend_variables(run_id: str) -> dict[str, str]:
    return {
        "BENCH_RUN_ID": run_id,
        "BENCH_PAID": ":".join(common.PAID_SPEND),
        "BENCH_PLAN": ":".join(common.PLAN_SPEND),
        "BENCH_PLAN_EVERY": "4",
    }


def spend_entry(request_id: str, target: tuple[str, str, str]) -> dict[str, Any]:
    connection_id, provider, model = target
    return {
        "request_id": request_id,
        "connection_id": connection_id,
        "provider": provider,
        "model": model,
        "cost_usd": None,
        "input_tokens": 1200,
        "output_tokens": 250,
    }


def skipped(what: str, status: int) -> None:
    print(f"  skipped: {what} not available ({status})")


# --- (a) mixed load ---------------------------------------------------------------------


def phase_mixed(run: Run) -> None:
    print("\n== mixed load: pool reads while a second client reports spend")
    for label, target in (("paid", common.PAID_SPEND), ("plan", common.PLAN_SPEND)):
        status, _, body = common.http(
            "POST", SPEND, token=run.token, body=spend_entry(f"probe-{label}", target)
        )
        if status >= 300:
            print(f"  spend probe ({label}): {status} {body[:200]!r}")
            return
        answer = json.loads(body)
        money = ", ".join(
            f"{field} {answer[field]}"
            for field in ("cost_usd", "billed_usd", "list_price_usd")
            if field in answer
        )
        print(f"  spend probe ({label}): {status}, rung {answer['rung']}, {money}")
    c = run.args.connections
    health = run.healthz()
    pools = run.load({"p": (POOL, run.wrk_options(c))})["p"]
    spend_options = run.wrk_options(
        run.args.spend_connections,
        BENCH_SPEND="single",
        **spend_variables(f"alone-{time.time_ns()}"),
    )
    spend_alone = run.load({"s": (SPEND, spend_options)})["s"]
    both = run.load(
        {
            "pools": (POOL, run.wrk_options(c)),
            "spend": (
                SPEND,
                run.wrk_options(
                    run.args.spend_connections,
                    BENCH_SPEND="single",
                    **spend_variables(f"mixed-{time.time_ns()}"),
                ),
            ),
        }
    )
    run.figures["mixed"] = {
        "healthz": health,
        "pools_alone": pools,
        "spend_alone": spend_alone,
        **both,
    }
    h = health["rps"]
    print(common.HEADER)
    print(common.row("/healthz", health, h))
    print(common.row("GET pools alone", pools, h))
    print(common.row(f"POST spend alone ({run.args.spend_connections} conn)", spend_alone, h))
    print(common.row("GET pools, with spend", both["pools"], h))
    print(common.row(f"POST spend ({run.args.spend_connections} conn)", both["spend"], h))
    status, _, body = common.http("GET", "/api/v1/spend/summary", token=run.token)
    if status == 200:
        rungs = json.loads(body)["rungs"]
        print(
            "  budgets after the run: "
            + ", ".join(
                f"{name} {r['spent_usd']:.2f} of {r['budget_usd']} USD"
                + (" EXHAUSTED" if r["exhausted"] else "")
                for name, r in rungs.items()
            )
        )
    p, s = both["pools"], both["spend"]
    print(share_line(p["rps"], s["rps"], h, run.args.connections, run.args.spend_connections))
    errors = sum(int(r["non_2xx"] + r["errors"]) for r in (p, s))
    run.verdict(
        "mixed: pools >= 0.4 x healthz, p99 <= 15 ms",
        f"{p['rps'] / h:.2f}, {p['p99_ms']:.1f} ms",
        p["rps"] / h >= TARGETS["pools_ratio"] and p["p99_ms"] <= TARGETS["pools_p99_ms"],
    )
    run.verdict(
        "mixed: spend >= 0.25 x healthz, p99 <= 25 ms",
        f"{s['rps'] / h:.2f} ({s['rps']:.1f} req/s), {s['p99_ms']:.1f} ms",
        s["rps"] / h >= TARGETS["spend_ratio"] and s["p99_ms"] <= TARGETS["spend_p99_ms"],
    )
    run.verdict("mixed: zero non-2xx", str(errors), errors == 0)


def share_line(pools: float, spend: float, health: float, pool_conns: int, spend_conns: int) -> str:
    """What the mixed run's split asks of the spend target. Each wrk connection sends its
    next request when its answer arrives, and the server takes its connections in turn,
    so each class gets about its share of the connections: with the per-connection rates
    of this run in the same proportion, spend at TARGETS["spend_ratio"] x healthz would
    come with pools at the printed multiple of healthz (1.0 and more: more than the
    server answers of anything, let alone beside spend)."""
    if not (pools and spend and health):
        return "  per connection: no answers to compare"
    per_pool, per_spend = pools / pool_conns, spend / spend_conns
    needed = TARGETS["spend_ratio"] * (per_pool / per_spend) * (pool_conns / spend_conns)
    return (
        f"  per connection: pools {per_pool:.0f} req/s, spend {per_spend:.0f} req/s; "
        f"in that proportion, spend at {TARGETS['spend_ratio']} x healthz comes with "
        f"pools at {needed:.2f} x healthz"
    )


# --- (b) batch spend --------------------------------------------------------------------


def phase_batch(run: Run) -> None:
    size = run.args.batch_size
    print(f"\n== batch spend: POST {BATCH}, {size} entries a request")
    probe = {"entries": [spend_entry(f"probe-batch-{i}", common.PAID_SPEND) for i in range(2)]}
    status, _, body = common.http("POST", BATCH, token=run.token, body=probe)
    if status == 404:
        skipped(f"POST {BATCH}", status)
        return
    if status != 200:
        print(f"  probe answered {status}: {body[:200]!r}")
        return
    answer = json.loads(body)
    print(f"  probe: created {answer.get('created')}, duplicates {answer.get('duplicates')}")
    options = run.wrk_options(
        run.args.batch_connections,
        BENCH_SPEND="batch",
        BENCH_BATCH_SIZE=str(size),
        **spend_variables(f"batch-{time.time_ns()}"),
    )
    common.measured({"b": (BATCH, options)}, duration=2, warmup=0)  # unmeasured warm-up
    before = SpendEntry.objects.count()
    started = time.monotonic()
    result = common.measured({"b": (BATCH, options)}, duration=run.args.duration, warmup=0)["b"]
    elapsed = time.monotonic() - started
    stored = SpendEntry.objects.count() - before
    answered = (result["requests"] - result["non_2xx"]) * size
    rate = answered / (result["requests"] / result["rps"]) if result["requests"] else 0.0
    run.figures["batch"] = {"wrk": result, "entries_per_s": rate, "stored": stored}
    print(common.HEADER)
    print(common.row(f"POST batch ({run.args.batch_connections} conn)", result, None))
    print(
        f"  {rate:,.0f} entries/s answered; {stored:,} ledger rows stored in "
        f"{elapsed:.1f} s ({stored / elapsed:,.0f}/s, wrk's start and end included)"
    )
    run.verdict(
        "batch: >= 20,000 entries/s",
        f"{rate:,.0f}/s",
        rate >= TARGETS["batch_entries_per_s"] and result["non_2xx"] == 0,
    )


# --- (c) 304 revalidation ---------------------------------------------------------------


def phase_revalidate(run: Run) -> None:
    print(f"\n== revalidation: GET {POOL} with If-None-Match")
    status, headers, _ = common.http("GET", POOL, token=run.token)
    tag = headers.get("etag")
    if status != 200 or not tag:
        skipped(f"ETag on GET {POOL} (answered {status}, no ETag)", 404)
        return
    again, _, body = common.http("GET", POOL, token=run.token, headers={"If-None-Match": tag})
    if again != 304:
        skipped(f"304 for If-None-Match on GET {POOL} (answered {again})", 404)
        return
    print(f"  ETag {tag}; Cache-Control {headers.get('cache-control')!r}; 304 body {len(body)} B")
    c = run.args.connections
    health = run.healthz()
    result = run.load({"r": (POOL, run.wrk_options(c, BENCH_IF_NONE_MATCH=tag))})["r"]
    run.figures["revalidate"] = {"healthz": health, "304": result}
    after, _, _ = common.http("GET", POOL, token=run.token, headers={"If-None-Match": tag})
    if after != 304:  # wrk counts only statuses >= 400: a 200 would pass unseen
        print(f"  the tag changed during the run (now {after}): some answers were 200s")
    print(common.HEADER)
    print(common.row("/healthz", health, health["rps"]))
    print(common.row("GET pools, If-None-Match (304)", result, health["rps"]))
    ratio = result["rps"] / health["rps"]
    # A 503 is answered fast too: a run with any is not counted as met.
    failed = int(result["non_2xx"] + result["errors"])
    run.verdict(
        "304 revalidation >= 0.9 x healthz, no non-2xx",
        f"{ratio:.2f}, {failed} non-2xx",
        ratio >= 0.9 and failed == 0,
    )


# --- (d) the change feed ----------------------------------------------------------------


class FeedClient:
    """One gateway's long-poll loop on its own keep-alive connection and thread."""

    def __init__(self, token: str, wait: int) -> None:
        self.token = token
        self.wait = wait
        self.connection = http.client.HTTPConnection("127.0.0.1", common.PORT, timeout=wait + 10)

    def poll(self, after: str) -> tuple[int, str, float]:
        """(status, version, the moment the answer arrived)."""
        self.connection.request(
            "GET",
            f"{CHANGES}?after={after}&wait={self.wait}",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        response = self.connection.getresponse()
        body = response.read()
        arrived = time.perf_counter()
        version = json.loads(body)["version"] if response.status == 200 else ""
        return response.status, str(version), arrived

    def close(self) -> None:
        sock = self.connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.connection.close()


def current_version(token: str) -> tuple[int, str]:
    status, _, body = common.http("GET", f"{CHANGES}?wait=0", token=token)
    return status, (str(json.loads(body)["version"]) if status == 200 else "")


def flip_write(token: str, round_number: int) -> float:
    """A reading that drops FLIP_CONNECTION out (1 % left) or brings it back (90 %):
    a write that changes a pool. Returns the moment its response arrived."""
    remaining = 1.0 if round_number % 2 == 0 else 90.0
    status, _, body = common.http(
        "POST",
        f"/api/v1/connections/{common.FLIP_CONNECTION}/readings",
        token=token,
        body={"remaining_percent": remaining},
        timeout=40,
    )
    arrived = time.perf_counter()
    if status != 201:
        raise SystemExit(f"the reading answered {status}: {body[:200]!r}")
    return arrived


def propagation_round(run: Run, clients: list[FeedClient], version: str, index: int) -> Any:
    answers: list[tuple[int, str, float] | BaseException] = [ValueError("no answer")] * len(clients)

    def follow(slot: int) -> None:
        try:
            answers[slot] = clients[slot].poll(version)
        except BaseException as error:  # a timeout or a reset: reported, not raised
            answers[slot] = error

    threads = [threading.Thread(target=follow, args=(i,), daemon=True) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    time.sleep(run.args.settle)  # every client's request reaches the server and waits
    written = flip_write(run.token, index)
    for thread in threads:
        thread.join(timeout=40)
    return written, answers


def phase_feed(run: Run) -> None:
    print(f"\n== change feed: {run.args.feed_clients} clients long-polling {CHANGES}")
    status, version = current_version(run.token)
    if status == 404:
        skipped(f"GET {CHANGES}", status)
        return
    if status != 200:
        print(f"  {CHANGES} answered {status}")
        return
    clients = [FeedClient(run.token, 30) for _ in range(run.args.feed_clients)]
    latencies: list[float] = []
    missed = 0
    try:
        for index in range(run.args.rounds):
            started = time.monotonic()
            written, answers = propagation_round(run, clients, version, index)
            versions = set()
            for answer in answers:
                if isinstance(answer, BaseException) or answer[0] != 200 or answer[1] == version:
                    missed += 1
                    continue
                versions.add(answer[1])
                latencies.append((answer[2] - written) * 1000)
            if time.monotonic() - started > 10:
                print(f"  round {index} took {time.monotonic() - started:.1f} s: stopping")
                break
            _, version = current_version(run.token)
            if len(versions) > 1:
                print(f"  round {index}: clients saw {len(versions)} different versions")
    finally:
        for client in clients:
            client.close()
    run.figures["propagation_ms"] = latencies
    run.figures["propagation_missed"] = missed
    if latencies:
        ordered = sorted(latencies)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        print(
            f"  {len(latencies)} answers over {run.args.rounds} writes, {missed} missed: "
            f"p50 {statistics.median(ordered):.1f} ms, p99 {p99:.1f} ms, max {ordered[-1]:.1f} ms"
            f" (min {ordered[0]:.1f} ms; negative: answered before the write's response)"
        )
        run.verdict(
            "propagation p99 <= 250 ms", f"{p99:.1f} ms, {missed} missed", p99 <= 250 and not missed
        )
    else:
        print(f"  no client saw a new version ({missed} missed)")
        run.verdict("propagation p99 <= 250 ms", "no answers", False)
    waiting_clients(run)


def waiting_clients(run: Run) -> None:
    count = run.args.waiting_clients
    print(f"\n== pool throughput with {count} clients waiting on {CHANGES} vs none")
    c = run.args.connections
    alone = run.load({"p": (POOL, run.wrk_options(c))})["p"]
    _, version = current_version(run.token)
    stop = threading.Event()
    refused: list[int] = []
    clients = [FeedClient(run.token, 30) for _ in range(count)]

    def wait_loop(client: FeedClient) -> None:
        after = version
        while not stop.is_set():
            try:
                status, seen, _ = client.poll(after)
            except (OSError, http.client.HTTPException):
                return
            if status != 200:
                refused.append(status)
                return
            after = seen

    threads = [threading.Thread(target=wait_loop, args=(cl,), daemon=True) for cl in clients]
    for thread in threads:
        thread.start()
    time.sleep(run.args.settle)
    try:
        waiting = run.load({"p": (POOL, run.wrk_options(c))})["p"]
    finally:
        stop.set()
        for client in clients:
            client.close()
    run.figures["waiting"] = {"alone": alone, "waiting": waiting, "refused": refused}
    print(common.HEADER)
    print(common.row("GET pools, nobody waiting", alone, alone["rps"]))
    print(common.row(f"GET pools, {count} waiting", waiting, alone["rps"]))
    if refused:
        print(f"  {len(refused)} waiting clients were answered {sorted(set(refused))} and left")
    ratio = waiting["rps"] / alone["rps"]
    failed = int(waiting["non_2xx"] + waiting["errors"])
    run.verdict(
        f"pools with {count} waiting >= 0.8 x without",
        f"{ratio:.2f}, {failed} non-2xx",
        ratio >= 0.8 and failed == 0,
    )


# --- main -------------------------------------------------------------------------------

RUNNERS: dict[str, Callable[[Run], None]] = {
    "mixed": phase_mixed,
    "batch": phase_batch,
    "revalidate": phase_revalidate,
    "feed": phase_feed,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--duration", type=float, default=10, help="seconds per measured run")
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--server", choices=common.SERVERS, default="gunicorn")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4, help="gunicorn gthread threads")
    parser.add_argument("--connections", type=int, default=16, help="pool and healthz wrk")
    parser.add_argument("--spend-connections", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--batch-connections", type=int, default=2)
    parser.add_argument("--feed-clients", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--waiting-clients", type=int, default=50)
    parser.add_argument(
        "--settle", type=float, default=0.5, help="seconds for long polls to reach the server"
    )
    parser.add_argument(
        "--timeline",
        choices=("on", "off"),
        default="on",
        help="the server records the pool timeline (POOL_TIMELINE_RECORDING), as deployed; "
        "off measures what recording costs (#17)",
    )
    parser.add_argument(
        "--no-server",
        action="store_true",
        help="measure a server you started yourself on 127.0.0.1:$BENCH_PORT, on the "
        "same DATABASE_URL, after this script has built the world (it waits for Enter)",
    )
    args = parser.parse_args()
    if args.no_server and not os.environ.get("BENCH_PORT"):
        parser.error("--no-server measures the server on BENCH_PORT: set it")
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if unknown := set(phases) - set(PHASES):
        parser.error(f"unknown phases {sorted(unknown)}: choose from {', '.join(PHASES)}")
    common.require_wrk()
    world = common.demo_world(args.candidates)
    print(
        f"world: {world['candidates']} candidates, {world['connections']} connections, "
        f"{world['readings']} readings\nprices: {world['prices']}"
    )
    if args.no_server:
        print(f"gateway token: {world['token']}")
        input(f"start your server on {common.BASE} now, then press Enter: ")
    else:
        print(common.describe_server(args.server, args.workers, args.threads))
        print(f"pool timeline recording: {args.timeline}")
    reference = common.machine_reference()
    print(f"machine reference (3M-step Python loop): {reference:.3f} s")
    run = Run(args, world["token"])
    run.figures["machine_reference_s"] = reference
    run.figures["server"] = common.describe_server(args.server, args.workers, args.threads)
    run.figures["timeline_recording"] = args.timeline
    server = None
    if not args.no_server:
        # The server's environment is this one's (common.server_env).
        os.environ["POOL_TIMELINE_RECORDING"] = "true" if args.timeline == "on" else "false"
        serve = {"workers": args.workers, "threads": args.threads, "log": "hot_path-server"}
        server = common.start_server(args.server, **serve)
    try:
        for phase in phases:
            RUNNERS[phase](run)
    finally:
        if server is not None:
            common.stop_server(server)
            print("\n" + common.server_log_summary("hot_path-server"))
    print("\n== against the targets (#14)")
    for what, figure, verdict in run.verdicts:
        print(f"  {what:<46} {figure:<28} {verdict}")
    common.LOG_DIR.mkdir(parents=True, exist_ok=True)
    path = common.LOG_DIR / f"hot_path-{time.strftime('%Y%m%dT%H%M%S')}.json"
    record = {"args": vars(args), "figures": run.figures, "verdicts": run.verdicts}
    path.write_text(json.dumps(record, indent=1, default=str))
    print(f"\nevery figure: {path.relative_to(common.ROOT)}")


if __name__ == "__main__":
    main()
