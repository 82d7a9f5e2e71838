"""Load benchmark of the pool endpoint, served by gunicorn (or uvicorn) on PostgreSQL,
driven by wrk from a separate process on loopback; `/healthz` of the same server in the
same run, so the ladder's own cost shows as a ratio; and an in-process microbenchmark of
the pure core at the same sizes. Server start-up and wrk come from bench/common.py.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/omniroute_bench \
        .venv/bin/python bench/load.py [--sizes 10,200,2000] [--duration 10] [--workers 3] \
        [--server gunicorn|uvicorn] [--threads 1]

Needs Debian's `wrk` (`apt-get install wrk`) and gunicorn (in the dev extra). Prints a
table; `make bench` runs it with the defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import common  # sets up Django: before any model
from django.core.management import call_command

from billing.classify import Billing, BillingVerdict, Overage
from billing.tiers import Tier
from ladder import core, services
from ladder.models import Candidate, Connection, QuotaReading
from ladder.tokens import create_token


def build_world(size: int) -> list[dict[str, object]]:
    """`size` candidates, each allowlisting a plan login and a metered key."""
    Candidate.objects.all().delete()
    QuotaReading.objects.all().delete()
    Connection.objects.all().delete()
    now = datetime.now(UTC)
    pool: list[dict[str, object]] = []
    connections = []
    for index in range(size):
        connections.append(
            Connection(connection_id=f"plan-{index}", provider="claude", auth_type="oauth")
        )
        connections.append(
            Connection(connection_id=f"key-{index}", provider="openai", auth_type="apikey")
        )
    Connection.objects.bulk_create(connections)
    for index in range(size):
        # Readings an hour into the future of staleness: the world stays stable while measured.
        services.store_reading(
            f"plan-{index}",
            services.ReadingInput(remaining_percent=50.0 + index % 40, checked_at=now),
            now=now,
        )
    Candidate.objects.bulk_create(
        Candidate(
            provider="claude",
            model=f"model-{index}",
            categories=["coding"],
            priority=index,
            allowed_connection_ids=[f"plan-{index}", f"key-{index}"],
        )
        for index in range(size)
    )
    for index in range(size):
        pool.append(
            {
                "id": index,
                "provider": "claude",
                "model": f"model-{index}",
                "allowed_connection_ids": [f"plan-{index}", f"key-{index}"],
            }
        )
    return pool


def microbench(size: int) -> float:
    """Median milliseconds of one pure `decide` over `size` candidates x 2 connections."""
    now = datetime.now(UTC)
    plan = BillingVerdict(Billing.SUBSCRIPTION, Overage.HARD_STOP, "plan", 1)
    metered = BillingVerdict(Billing.METERED, Overage.METERS_TO_PAID, "keys", 2)
    views = {}
    candidates = []
    for index in range(size):
        views[f"plan-{index}"] = core.ConnectionView(
            f"plan-{index}",
            "claude",
            "oauth",
            plan,
            True,
            None,
            core.Reading(core.QuotaStatus.SAFE, 50.0, now + timedelta(hours=1), now),
            core.NEVER_READ,
        )
        views[f"key-{index}"] = core.ConnectionView(
            f"key-{index}", "openai", "apikey", metered, True, None, None, core.NEVER_READ
        )
        candidates.append(
            core.CandidateIn(
                index, "claude", f"m-{index}", ("coding",), None, (f"plan-{index}", f"key-{index}")
            )
        )
    tiers = {("claude", f"m-{index}"): Tier.CHEAP for index in range(size)}
    config = core.LadderConfig()
    timings = []
    for _ in range(max(5, 2000 // size)):
        started = time.perf_counter()
        core.decide(core.THRIFTY_AUTO_ID, candidates, views, tiers, {}, config, now)
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return timings[len(timings) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,200,2000")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="gunicorn: 1 = sync workers")
    parser.add_argument("--server", choices=common.SERVERS, default="gunicorn")
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    common.require_wrk()
    call_command("migrate", verbosity=0, skip_checks=True)
    _, token = create_token(f"bench-{int(time.time())}", "gateway")
    serve = {"workers": args.workers, "threads": args.threads}

    def load(path: str, secret: str | None = None, body: Path | None = None) -> dict[str, float]:
        # Two seconds unmeasured first: every worker process computes its first decision
        # (about 0.7 s alone at 2,000 candidates) and opens its connections; the figures
        # are the steady state that follows.
        variables = {"BENCH_TOKEN": secret} if secret else {}
        if body:
            variables["BENCH_BODY_FILE"] = str(body)
        options = {"connections": args.connections, "variables": variables}
        return common.measured({path: (path, options)}, duration=args.duration)[path]

    # What the server and loopback HTTP cost before any application code: the ceiling.
    server = common.start_server(args.server, app="hello", **serve)
    try:
        floor = load("/")
    finally:
        common.stop_server(server)
    rows: list[tuple[str, str, dict[str, float], float, str]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        pool = build_world(size)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as body:
            json.dump({"candidates": pool}, body)
        server = common.start_server(args.server, **serve)
        try:
            health = load("/healthz")
            get = load("/api/v1/pools/auto/thrifty", token)
            post = load("/api/v1/pools/auto/subscription", token, Path(body.name))
        finally:
            common.stop_server(server)
            os.unlink(body.name)
        core_ms = microbench(size)
        for name, result in (
            ("GET thrifty", get),
            ("POST subscription", post),
            ("/healthz", health),
        ):
            rows.append((str(size), name, result, result["rps"] / health["rps"], f"{core_ms:.3f}"))
    rows.append(("-", "static app (hello.py)", floor, float("nan"), ""))
    print(f"\n{common.describe_server(args.server, args.workers, args.threads)}")
    print(f"machine reference (3M-step Python loop): {common.machine_reference():.3f} s")
    print(
        f"\n{'size':>5} {'endpoint':<21} {'req/s':>9} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'p99 ms':>8} {'non-2xx':>8} {'of healthz':>10} {'core ms':>8}"
    )
    for label, name, r, ratio, cell in rows:
        print(
            f"{label:>5} {name:<21} {r['rps']:>9.0f} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f} "
            f"{r['p99_ms']:>8.2f} {int(r['non_2xx'] + r['errors']):>8} {ratio:>10.2f} {cell:>8}"
        )


if __name__ == "__main__":
    main()
