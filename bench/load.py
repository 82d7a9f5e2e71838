"""Load benchmark of the pool endpoint, served by gunicorn on PostgreSQL, driven by wrk
from a separate process on loopback; `/healthz` of the same server in the same run, so
the ladder's own cost shows as a ratio; and an in-process microbenchmark of the pure
core at the same sizes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/omniroute_bench \
        .venv/bin/python bench/load.py [--sizes 10,200,2000] [--duration 10] [--workers 3]

Needs Debian's `wrk` (`apt-get install wrk`) and gunicorn (in the dev extra). Prints a
table; `make bench` runs it with the defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/omniroute_bench")
if not os.environ.get("OMNIROUTE_CREDENTIAL_KEY"):
    from cryptography.fernet import Fernet

    os.environ["OMNIROUTE_CREDENTIAL_KEY"] = "bench:" + Fernet.generate_key().decode()

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from billing.classify import Billing, BillingVerdict, Overage  # noqa: E402
from billing.tiers import Tier  # noqa: E402
from ladder import core, services  # noqa: E402
from ladder.models import Candidate, Connection, QuotaReading  # noqa: E402
from ladder.tokens import create_token  # noqa: E402

PORT = 8765
LUA = ROOT / "bench" / "wrk_report.lua"


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


def wrk(
    url: str, *, token: str | None, body_file: Path | None, duration: int, connections: int
) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("BENCH_TOKEN", None)
    env.pop("BENCH_BODY_FILE", None)
    if token:
        env["BENCH_TOKEN"] = token
    if body_file:
        env["BENCH_BODY_FILE"] = str(body_file)
    result = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{duration}s", "-s", str(LUA), url],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    summary: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return summary


def start_server(
    workers: int, app: str = "omniroute_admin.wsgi", chdir: Path = ROOT
) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="bench-" + "x" * 50,
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        DJANGO_SECURE_SSL_REDIRECT="false",
        LOG_LEVEL="WARNING",
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--chdir",
            str(chdir),
            app,
            "-b",
            f"127.0.0.1:{PORT}",
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=1)
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("gunicorn did not start")


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


def machine_reference() -> float:
    """Seconds for a fixed pure-Python loop (best of three): how fast this machine runs
    Python right now, so figures from different machines or moments can be compared."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for value in range(3_000_000):
            total += value
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,200,2000")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")
    call_command("migrate", verbosity=0, skip_checks=True)
    _, token = create_token(f"bench-{int(time.time())}", "gateway")
    base = f"http://127.0.0.1:{PORT}"

    def load(path: str, secret: str | None = None, body: Path | None = None) -> dict[str, float]:
        # Two seconds unmeasured first: every worker process computes its first decision
        # (about 0.7 s alone at 2,000 candidates) and opens its connections; the figures
        # are the steady state that follows.
        for duration in (2, args.duration):
            result = wrk(
                f"{base}{path}",
                token=secret,
                body_file=body,
                duration=duration,
                connections=args.connections,
            )
        return result

    # What gunicorn and loopback HTTP cost before any application code: the ceiling.
    server = start_server(args.workers, "hello:app", ROOT / "bench")
    try:
        floor = load("/")
    finally:
        server.terminate()
        server.wait()
    rows: list[tuple[str, str, dict[str, float], float, str]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        pool = build_world(size)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as body:
            json.dump({"candidates": pool}, body)
        server = start_server(args.workers)
        try:
            health = load("/healthz")
            get = load("/api/v1/pools/auto/thrifty", token)
            post = load("/api/v1/pools/auto/subscription", token, Path(body.name))
        finally:
            server.terminate()
            server.wait()
            os.unlink(body.name)
        core = microbench(size)
        for name, result in (
            ("GET thrifty", get),
            ("POST subscription", post),
            ("/healthz", health),
        ):
            rows.append((str(size), name, result, result["rps"] / health["rps"], f"{core:.3f}"))
    rows.append(("-", "static WSGI app", floor, float("nan"), ""))
    print(f"\nmachine reference (3M-step Python loop): {machine_reference():.3f} s")
    print(
        f"\n{'size':>5} {'endpoint':<18} {'req/s':>9} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'p99 ms':>8} {'non-2xx':>8} {'of healthz':>10} {'core ms':>8}"
    )
    for label, name, r, ratio, core_ms in rows:
        print(
            f"{label:>5} {name:<18} {r['rps']:>9.0f} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f} "
            f"{r['p99_ms']:>8.2f} {int(r['non_2xx'] + r['errors']):>8} {ratio:>10.2f} {core_ms:>8}"
        )


if __name__ == "__main__":
    main()
