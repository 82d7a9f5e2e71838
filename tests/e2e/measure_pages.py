"""Page times on the demo world and on the demo world plus 500 connections: a full
request through Django's test client (every middleware, the view, the queries and the
rendering; no socket, whose delayed-ACK stalls on the development server would hide
the page's own cost). Not collected by default and asserts no timing; run it
explicitly and read the table:

    .venv/bin/python -m pytest tests/e2e/measure_pages.py -p no:cacheprovider -s
"""

from __future__ import annotations

import statistics
import time

import pytest
from django.test import Client
from django.utils import timezone

from tests.worlds import grow_world, seed_demo_world, signed_in

PAGES = (
    "/",
    "/connections/",
    "/connections/claude-max-1/",
    "/pools/",
    "/pools/?auto_id=auto/thrifty",
    "/catalog/",
    "/prices/",
    "/settings/",
    "/tokens/",
)
ROUNDS = 9

pytestmark = pytest.mark.django_db


def _report(title: str, client: Client) -> None:
    print(f"\n{title}: median and worst of {ROUNDS} requests (ms), bytes")
    for path in PAGES:
        assert client.get(path).status_code == 200  # warm
        times = []
        size = 0
        for _ in range(ROUNDS):
            started = time.perf_counter()
            response = client.get(path)
            times.append((time.perf_counter() - started) * 1000)
            size = len(response.content)
            assert response.status_code == 200
        print(f"  {path:32} {statistics.median(times):7.1f} {max(times):7.1f} {size:9}")


def test_measure_page_times(client: Client) -> None:
    now = timezone.now()
    seed_demo_world(now)
    signed_in(client, "olga", "operator")
    _report("demo world", client)
    grow_world(500, now)
    _report("demo world + 500 connections", client)
