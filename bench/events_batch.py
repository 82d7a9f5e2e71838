"""How long the events batch takes to answer by its size (issue #30: "batches that are
atomic, idempotent and inside the deadline").

On PostgreSQL, the demo-sized world (200 candidates, LiteLLM's full price map), served by
the production command (gunicorn with uvicorn's worker class on `omniroute_admin.asgi`),
with the request deadline off so that every size answers and is timed whole. Each batch
is what a gateway sends in a burst of failures: `rate_limited` entries with Retry-After
spread over the plan connections, each with an `event_id`, and a quarter of them
successes carrying Codex quota headers. Each size is sent `--repeats` times (new ids each
time); the median answer time is printed beside the API deadline (0.9 s), and the retry
of the last batch (the same ids: answered as then, applied never again) beside it.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/omniroute_bench \\
        .venv/bin/python bench/events_batch.py [--sizes 50,100,200,500,1000] [--repeats 3]

The database is emptied first: its name must contain "bench".
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

import common  # sets up Django: before any model

DEADLINE = 0.9


def batch(connections: list[str], size: int) -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    for n in range(size):
        cid = connections[n % len(connections)]
        entry: dict[str, object] = {"connection_id": cid, "event_id": uuid.uuid4().hex}
        if n % 4 == 3:
            entry |= {"kind": "success", "headers": {"x-codex-primary-used-percent": "40"}}
        else:
            entry |= {"kind": "rate_limited", "retry_after_seconds": 5}
        events.append(entry)
    return events


def timed(token: str, events: list[dict[str, object]]) -> tuple[int, float]:
    started = time.perf_counter()
    status, _, _ = common.http(
        "POST", "/api/v1/events/batch", token=token, body={"events": events}, timeout=120
    )
    return status, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50,100,200,500,1000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from ladder.models import Connection

    world = common.demo_world(200)
    connections = list(Connection.objects.values_list("connection_id", flat=True))
    os.environ["API_REQUEST_DEADLINE_SECONDS"] = "0"  # time each batch whole
    server = common.start_server("asgi", workers=1, threads=1)
    try:
        print(f"events batch on {len(connections)} connections, load {os.getloadavg()[0]:.1f}")
        print(f"{'entries':>8} {'median s':>9} {'per entry ms':>13} {'x deadline':>11} retry s")
        for size in (int(s) for s in args.sizes.split(",")):
            times = []
            events: list[dict[str, object]] = []
            for _ in range(args.repeats):
                events = batch(connections, size)
                status, seconds = timed(world["token"], events)
                if status != 200:
                    raise SystemExit(f"{size} entries answered {status}")
                times.append(seconds)
            _, again = timed(world["token"], events)
            median = statistics.median(times)
            print(
                f"{size:>8} {median:>9.3f} {median / size * 1000:>13.2f} "
                f"{median / DEADLINE:>11.2f} {again:.3f}"
            )
    finally:
        common.stop_server(server)


if __name__ == "__main__":
    main()
