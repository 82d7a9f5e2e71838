"""What the benchmarks share: Django set up against the benchmark database, the server
command (gunicorn or uvicorn, ONE function), starting and stopping it, running wrk
(alone or several at once), LiteLLM's full price map, the demo-sized world and the
machine reference.

Importing this module sets up Django: import it before any model.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")  # the world's set-up logs every write at INFO
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/omniroute_bench")
if not os.environ.get("OMNIROUTE_CREDENTIAL_KEY"):
    from cryptography.fernet import Fernet

    os.environ["OMNIROUTE_CREDENTIAL_KEY"] = "bench:" + Fernet.generate_key().decode()

import django  # noqa: E402

django.setup()


def free_port() -> int:
    """A port nobody listens on now: several benchmarks may run on one machine at once,
    and one must never measure (or load) another's server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


PORT = int(os.environ.get("BENCH_PORT") or free_port())
BASE = f"http://127.0.0.1:{PORT}"
LUA = BENCH / "wrk_report.lua"
SERVERS = ("gunicorn", "asgi", "uvicorn")
PIP_DOWNLOAD = (sys.executable, "-m", "pip", "download", "--no-deps", "--quiet")
PRICE_MAP_NAME = "model_prices_and_context_window_backup.json"
# LiteLLM's provider names for the providers this project's demo world uses.
PRICE_PROVIDER_MAP = ("anthropic=claude",)


# --- the server ------------------------------------------------------------------------


def server_command(server: str, *, workers: int, threads: int, app: str = "project") -> list[str]:
    """The command that serves `app` ("project", or "hello": bench/hello.py, the floor)
    with `server`: "gunicorn" (`omniroute_admin.wsgi`; gthread with `threads` threads
    per worker, sync when `threads` is 1), "asgi" (the production command: gunicorn with
    uvicorn's worker class on `omniroute_admin.asgi`) or "uvicorn" (`omniroute_admin.asgi`;
    one event loop per worker, `threads` unused). Beware uvicorn's issue #3149: with `--workers`
    above 1 its listening socket loses TCP_NODELAY on Linux (about 40 ms a keep-alive
    request); bench/README.md shows it."""
    if server == "gunicorn":
        target = "omniroute_admin.wsgi:application" if app == "project" else "hello:app"
        command = [sys.executable, "-m", "gunicorn", target, "-b", f"127.0.0.1:{PORT}"]
        command += ["--workers", str(workers), "--log-level", "warning"]
        if threads > 1:
            command += ["--worker-class", "gthread", "--threads", str(threads)]
        if app != "project":
            command += ["--chdir", str(BENCH)]
        return command
    if server == "asgi":
        # The production command (docs/SCALING.md): gunicorn binds the socket and runs
        # uvicorn's worker class on the ASGI entry (no uvicorn #3149: gunicorn's socket).
        target = "omniroute_admin.asgi:application" if app == "project" else "hello:asgi_app"
        command = [sys.executable, "-m", "gunicorn", target, "-b", f"127.0.0.1:{PORT}"]
        command += ["--workers", str(workers), "--log-level", "warning"]
        command += ["--worker-class", "omniroute_admin.worker.Worker"]
        if app != "project":
            command += ["--chdir", str(BENCH)]
        return command
    if server == "uvicorn":
        if not (ROOT / "omniroute_admin" / "asgi.py").exists():
            raise SystemExit("uvicorn needs omniroute_admin/asgi.py")
        target = "omniroute_admin.asgi:application" if app == "project" else "hello:asgi_app"
        command = [sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1"]
        command += ["--port", str(PORT), "--workers", str(workers), "--log-level", "warning"]
        command += ["--no-access-log", "--lifespan", "off"]
        if app != "project":
            command += ["--app-dir", str(BENCH)]
        return command
    raise SystemExit(f"unknown server {server!r}: one of {', '.join(SERVERS)}")


def server_env() -> dict[str, str]:
    return dict(
        os.environ,
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="bench-" + "x" * 50,
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        DJANGO_SECURE_SSL_REDIRECT="false",
        LOG_LEVEL="WARNING",
    )


LOG_DIR = ROOT / "var" / "bench"


def start_server(
    server: str, *, workers: int, threads: int, app: str = "project", log: str | None = None
) -> subprocess.Popen[bytes]:
    """Start the server and return once it answers `/healthz` (hello answers any path).
    With `log`, its output goes to var/bench/<log>.log (see `server_log_summary`)."""
    if not port_is_free(PORT):
        raise SystemExit(f"port {PORT} is in use: another server would be measured")
    output = None
    if log:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        output = (LOG_DIR / f"{log}.log").open("wb")
    process = subprocess.Popen(
        server_command(server, workers=workers, threads=threads, app=app),
        cwd=ROOT,
        env=server_env(),
        stdout=output,
        stderr=output,
    )
    if output:
        output.close()  # the server holds its own copy
    global _server_pid
    _server_pid = process.pid
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{server} exited with {process.returncode}")
        try:
            urllib.request.urlopen(f"{BASE}/healthz", timeout=1)
            return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{server} did not start")


# The process start_server started last (its workers are its children).
_server_pid: int | None = None


def server_cpu_ms() -> dict[int, float]:
    """CPU time so far (user + system, ms) of each worker process of the running server
    (the children of the process start_server started; that process itself when it has
    none). Which workers a phase's connections landed on shows in how this grows: a
    gunicorn or uvicorn worker takes the connections it accepts for their lifetime, and
    one process runs its Python on one core at a time."""
    if _server_pid is None:
        return {}
    cpu: dict[int, float] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # After the command: state, ppid, ..., utime and stime (fields 14 and 15 of stat).
        pid = int(stat.parent.name)
        if int(fields[1]) == _server_pid or pid == _server_pid:
            cpu[pid] = (int(fields[11]) + int(fields[12])) * 1000 / ticks
    if len(cpu) > 1:
        cpu.pop(_server_pid, None)  # the master only supervises
    return cpu


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def server_log_summary(log: str) -> str:
    """What the server logged at WARNING or above: deadline 503s and other lines."""
    path = LOG_DIR / f"{log}.log"
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    late = sum("answered 503" in line for line in lines)
    other = sum(
        ("WARNING" in line or "ERROR" in line or "Traceback" in line)
        and "answered 503" not in line
        and "Service Unavailable" not in line
        and "Not Found" not in line  # a skipped phase's probe
        for line in lines
    )
    return (
        f"server log {path.relative_to(ROOT)}: {late} answers 503 past the deadline, "
        f"{other} other warnings or errors"
    )


def describe_server(server: str, workers: int, threads: int) -> str:
    if server == "gunicorn":
        kind = f"gthread, {workers} workers x {threads} threads" if threads > 1 else "sync"
        return f"gunicorn omniroute_admin.wsgi ({kind})"
    return f"uvicorn omniroute_admin.asgi ({workers} workers)"


# --- HTTP from the benchmark process ----------------------------------------------------


def http(
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10,
) -> tuple[int, dict[str, str], bytes]:
    """One request: status, headers (lower-cased names) and body; never raises on 4xx/5xx."""
    request = urllib.request.Request(f"{BASE}{path}", method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        request.data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, _lower(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, _lower(error.headers), error.read()


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


# --- wrk --------------------------------------------------------------------------------

WRK_VARIABLES = (
    "BENCH_TOKEN",
    "BENCH_BODY_FILE",
    "BENCH_IF_NONE_MATCH",
    "BENCH_SPEND",
    "BENCH_BATCH_SIZE",
    "BENCH_RUN_ID",
    "BENCH_PAID",
    "BENCH_PLAN",
    "BENCH_PLAN_EVERY",
)


def require_wrk() -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")


def wrk_start(
    path: str,
    *,
    duration: float,
    connections: int,
    threads: int = 2,
    variables: Mapping[str, str] | None = None,
) -> subprocess.Popen[str]:
    """Start wrk against `path` with bench/wrk_report.lua; BENCH_* `variables` choose
    the request (see the script). Collect the figures with `wrk_result`."""
    env = {name: value for name, value in os.environ.items() if name not in WRK_VARIABLES}
    env.update(variables or {})
    if "BENCH_RUN_ID" in env:  # request ids unique across runs (a warm-up, then the run)
        env["BENCH_RUN_ID"] += f"-{time.time_ns()}"
    return subprocess.Popen(
        [
            "wrk",
            f"-t{min(threads, connections)}",
            f"-c{connections}",
            f"-d{max(1, round(duration))}s",
            "--timeout",
            "10s",
            "-s",
            str(LUA),
            f"{BASE}{path}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wrk_result(process: subprocess.Popen[str]) -> dict[str, float]:
    """The JSON summary wrk_report.lua prints: requests, errors (socket errors and
    timeouts), non_2xx (status >= 400), rps, p50_ms, p95_ms, p99_ms."""
    out, err = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"wrk failed ({process.returncode}): {err.strip()} {out.strip()}")
    summary: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return summary


def wrk(path: str, **options: Any) -> dict[str, float]:
    return wrk_result(wrk_start(path, **options))


def measured(
    runs: Mapping[str, tuple[str, Mapping[str, Any]]], *, duration: float, warmup: float = 2
) -> dict[str, dict[str, float]]:
    """Run every wrk of `runs` (name -> (path, options)) at the same time, first for
    `warmup` seconds unmeasured (every worker computes its first decision and opens its
    connections), then for `duration`: the steady state's figures, by name."""
    results: dict[str, dict[str, float]] = {}
    for length in (warmup, duration) if warmup > 0 else (duration,):
        before, cpu_before = stall_meter(), server_cpu_ms()
        started_at = time.monotonic()
        started = {
            name: wrk_start(path, duration=length, **options)
            for name, (path, options) in runs.items()
        }
        results = {name: wrk_result(process) for name, process in started.items()}
        stalls = {key: value - before[key] for key, value in stall_meter().items()}
        elapsed_ms = (time.monotonic() - started_at) * 1000
        cpu = server_cpu_ms()
        # Each worker's share of one core over the run, busiest first (worker_1_cpu_pct...).
        busy = sorted(
            (100 * (ms - cpu_before.get(pid, 0.0)) / elapsed_ms for pid, ms in cpu.items()),
            reverse=True,
        )
        for figures in results.values():
            figures.update(stalls)
            figures.update({f"worker_{rank}_cpu_pct": pct for rank, pct in enumerate(busy, 1)})
    return results


def stall_meter() -> dict[str, float]:
    """What a p99 can come from outside the server, as counters to subtract: PostgreSQL's
    checkpoints so far (each ends in fsyncs that the WAL's flushes, so every commit, queue
    behind on this machine's disk), and the time some task stalled on the disk
    (`/proc/pressure/io`, "some", in ms; 0 where the kernel has no pressure stall
    information), and the CPU time the hypervisor gave to other machines while this one
    had work to run ("steal", `/proc/stat`, in ms, for all cores together)."""
    from django.db import connection

    checkpoints = 0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter")
            (checkpoints,) = cursor.fetchone()
    io_some_ms = 0.0
    try:
        for line in Path("/proc/pressure/io").read_text().splitlines():
            if line.startswith("some"):
                io_some_ms = int(line.rsplit("total=", 1)[1]) / 1000
    except (OSError, ValueError, IndexError):
        pass
    steal_ms = 0.0
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        steal_ms = int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    return {"checkpoints": float(checkpoints), "io_stall_ms": io_some_ms, "steal_ms": steal_ms}


def row(name: str, result: Mapping[str, float], health: float | None) -> str:
    ratio = f"{result['rps'] / health:>10.2f}" if health else f"{'':>10}"
    return (
        f"{name:<34} {result['rps']:>9.0f} {result['p50_ms']:>8.2f} {result['p99_ms']:>8.2f} "
        f"{int(result['non_2xx'] + result['errors']):>8} {ratio} "
        f"{int(result.get('checkpoints', 0)):>5} {result.get('io_stall_ms', 0):>8.0f} "
        f"{result.get('steal_ms', 0):>8.0f} "
        f"{'/'.join(f'{result[key]:.0f}' for key in result if key.startswith('worker_')):>11}"
    )


HEADER = (
    f"{'':<34} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8} {'of healthz':>10} "
    f"{'ckpt':>5} {'io ms':>8} {'steal ms':>8} {'workers %':>11}"
)


# --- LiteLLM's price map ----------------------------------------------------------------


def litellm_price_map() -> tuple[bytes, str]:
    """LiteLLM's full `model_prices_and_context_window_backup.json` and where it came
    from: the installed `litellm` package when there is one, else the wheel that
    `pip download --no-deps litellm` fetches into a temporary directory (read with
    zipfile, never installed). No other network access."""
    try:
        from importlib.resources import files

        resource = files("litellm").joinpath(PRICE_MAP_NAME)
        return resource.read_bytes(), f"installed litellm ({resource})"
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        pass
    with tempfile.TemporaryDirectory(prefix="bench-litellm-") as directory:
        subprocess.run(
            [*PIP_DOWNLOAD, "--dest", directory, "litellm"],
            check=True,
            capture_output=True,
        )
        wheels = sorted(Path(directory).glob("litellm-*.whl"))
        if not wheels:
            raise SystemExit("pip download litellm fetched no wheel")
        with zipfile.ZipFile(wheels[0]) as wheel:
            name = next(n for n in wheel.namelist() if n.endswith("/" + PRICE_MAP_NAME))
            return wheel.read(name), f"{wheels[0].name} (pip download)"


def import_litellm_prices() -> str:
    """Import LiteLLM's full map with the project's own `import_prices` command."""
    from django.core.management import call_command

    raw, source = litellm_price_map()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as file:
        file.write(raw)
    out = io.StringIO()
    try:
        maps = [f"--map={pair}" for pair in PRICE_PROVIDER_MAP]
        call_command("import_prices", file.name, *maps, stdout=out)
    finally:
        os.unlink(file.name)
    return f"{source}: {out.getvalue().strip()}"


# --- the world --------------------------------------------------------------------------

# Spend the mixed load reports: a paid rung with a budget it does not reach in a run, and
# a share on a plan-included rung (connection_id, provider, model).
PAID_SPEND = ("openai-key", "openai", "gpt-4o-mini")
PLAN_SPEND = ("claude-max-1", "claude", "claude-sonnet-4-5")
# A budget far above what a run spends (about 0.0003 USD a request), so no run crosses it.
BENCH_BUDGET_USD = Decimal("500000")
# A bulk plan connection (claude oauth, no cooldown, 94 % left) whose readings the feed
# benchmark flips in and out of its pool.
FLIP_CONNECTION = "bulk-0008"
# How long the world's readings stay fresh and its cooldowns last (the largest values the
# settings and a Retry-After allow): longer than any run.
STABLE_SECONDS = 86_400


def reset_database() -> None:
    """An empty schema, migrated afresh (data migrations included): only on PostgreSQL,
    and only on a database whose name says it is for benchmarks."""
    from django.core.management import call_command
    from django.db import connection

    name = str(connection.settings_dict["NAME"])
    if connection.vendor != "postgresql" or "bench" not in name:
        raise SystemExit(
            f"The benchmarks empty their database: point DATABASE_URL at a PostgreSQL "
            f"database whose name contains 'bench' (not {connection.vendor} {name!r})."
        )
    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA public CASCADE")
        cursor.execute("CREATE SCHEMA public")
    call_command("migrate", verbosity=0, skip_checks=True)


def demo_world(candidates: int = 200) -> dict[str, Any]:
    """The demo world (tests/worlds.py: seed_demo, readings, spend, a cooldown) grown by
    bulk connections to `candidates` candidates, LiteLLM's full price map imported, the
    rung budgets raised out of reach; on an emptied database. Returns what it holds and a
    fresh gateway token."""
    from ladder import services
    from ladder.models import Candidate, Connection
    from ladder.tokens import create_token
    from tests import worlds

    reset_database()
    now = datetime.now(UTC)
    worlds.seed_demo_world(now, history=False)
    demo = Candidate.objects.count()
    # grow_world adds one pinned candidate per connection and one allowlisted per 80.
    bulk = candidates - demo
    while bulk > 0 and demo + bulk + len(range(0, bulk - 9, 80)) > candidates:
        bulk -= 1
    worlds.grow_world(bulk, now)
    prices = import_litellm_prices()
    # A world that stays put while measured: no reading turns stale and no cooldown ends
    # during a run, so every decision change is one a benchmark's own write causes.
    tuning, _ = services.effective_settings_of(services.get_settings_row())
    tuning.update(
        cheap_budget_usd=BENCH_BUDGET_USD,
        premium_budget_usd=BENCH_BUDGET_USD,
        max_state_age_seconds=STABLE_SECONDS,
    )
    services.update_settings(tuning, actor="bench")
    cooling = Connection.objects.filter(cooldown_until__isnull=False)
    for connection_id in cooling.values_list("connection_id", flat=True):
        services.apply_event(
            connection_id, kind="rate_limited", retry_after_seconds=STABLE_SECONDS, now=now
        )
    _, token = create_token(f"bench-{int(time.time())}", "gateway")
    summary = worlds.world_summary()
    summary["prices"] = prices
    summary["token"] = token
    return summary


# --- the machine ------------------------------------------------------------------------


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
