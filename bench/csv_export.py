"""The spend CSV export at scale (issue #30, point 9): time to the first byte, total
time and the web worker's peak memory for `GET /api/v1/spend?format=csv` over a ledger of
N rows (1,000,000 by default), served by the production command (gunicorn with uvicorn's
worker class on `omniroute_admin.asgi`) on PostgreSQL; then two exports at once.

    DATABASE_URL=postgres://...:5432/<db> .venv/bin/python bench/csv_export.py [--rows N]

It adds N ledger rows whose request ids start with `bench-csv-` (one INSERT ... SELECT
generate_series) and deletes them at the end; nothing else in the database is touched.
The worker's memory is read from /proc: its resident size before the export and its
high-water mark (VmHWM) after. Results go to bench/README.md by hand."""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import common  # sets up Django: first
import httpx
from django.core.management import call_command
from django.db import connection

from ladder.models import ApiToken
from ladder.tokens import create_token

PREFIX = "bench-csv-"


def _fill(rows: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")  # a million rows: not a request
        cursor.execute("DELETE FROM ladder_spendentry WHERE request_id LIKE %s", [PREFIX + "%"])
        cursor.execute(
            """
            INSERT INTO ladder_spendentry (request_id, connection_id, provider, model,
                cost_usd, is_cost_computed, billed_usd, list_price_usd, input_tokens,
                output_tokens, rung, occurred_at, recorded_at)
            SELECT %s || n, 'bench-key', 'openai', 'gpt-4o-mini', 0.00123400, true,
                0.00123400, 0.00123400, 1000, 200, 'cheap',
                now() - make_interval(secs => n), now()
            FROM generate_series(1, %s) AS n
            """,
            [PREFIX, rows],
        )
        cursor.execute("ANALYZE ladder_spendentry")


def _clean() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")  # a million rows: not a request
        cursor.execute("DELETE FROM ladder_spendentry WHERE request_id LIKE %s", [PREFIX + "%"])


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _worker_pid() -> int:
    pids = [pid for pid in common.server_cpu_ms() if pid != common._server_pid]
    assert len(pids) == 1, pids
    return pids[0]


def _export(secret: str, out: dict[str, float], query: str = "format=csv") -> None:
    started = time.monotonic()
    size = lines = 0
    with (
        httpx.Client(timeout=600) as client,
        client.stream(
            "GET",
            f"{common.BASE}/api/v1/spend?{query}",
            headers={"Authorization": f"Bearer {secret}"},
        ) as response,
    ):
        assert response.status_code == 200, response.status_code
        for chunk in response.iter_bytes():
            if not size:
                out["first_byte_s"] = time.monotonic() - started
            size += len(chunk)
            lines += chunk.count(b"\n")
    out["total_s"] = time.monotonic() - started
    out["mb"] = size / 1e6
    out["lines"] = lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    rows = parser.parse_args().rows
    call_command("migrate", verbosity=0)
    started = time.monotonic()
    _fill(rows)
    print(f"ledger: {rows:,} rows added in {time.monotonic() - started:.1f} s")
    secret = create_token("bench-csv", ApiToken.Scope.GATEWAY)[1]
    server = common.start_server("asgi", workers=1, threads=8)
    try:
        pid = _worker_pid()
        small: dict[str, float] = {}
        # Warm the worker (the first request loads the URLconf): an export of no rows.
        _export(secret, small, "format=csv&rung=premium")
        before = _kib(pid, "VmRSS")
        one: dict[str, float] = {}
        _export(secret, one)
        peak_one = _kib(pid, "VmHWM")
        two = [{}, {}]  # type: ignore[var-annotated]
        threads = [threading.Thread(target=_export, args=(secret, out)) for out in two]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        peak_two = _kib(pid, "VmHWM")
    finally:
        common.stop_server(server)
        _clean()
        ApiToken.objects.filter(name="bench-csv").delete()
    print(f"worker RSS before: {before / 1024:.0f} MB")
    print(
        f"one export: first byte {one['first_byte_s'] * 1000:.0f} ms, all "
        f"{one['total_s']:.1f} s, {one['mb']:.0f} MB, {one['lines']:,} lines; "
        f"worker peak {peak_one / 1024:.0f} MB (+{(peak_one - before) / 1024:.0f} MB)"
    )
    for index, out in enumerate(two, 1):
        print(
            f"two at once, #{index}: first byte {out['first_byte_s'] * 1000:.0f} ms, "
            f"all {out['total_s']:.1f} s, {out['lines']:,} lines"
        )
    print(
        f"two at once: worker peak {peak_two / 1024:.0f} MB (+{(peak_two - before) / 1024:.0f} MB)"
    )


if __name__ == "__main__":
    main()
