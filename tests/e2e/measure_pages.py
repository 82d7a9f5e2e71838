"""Page times on the demo world and on the demo world plus 500 connections: a full
request through Django's test client (every middleware, the view, the queries and the
rendering; no socket, whose delayed-ACK stalls on the development server would hide
the page's own cost); and the bytes of each live part's poll, as Chromium sends it (gzip
accepted, the kept ETag named), with nothing changed and after one change. Not
collected by default and asserts no timing; run it explicitly and read the tables:

    .venv/bin/python -m pytest tests/e2e/measure_pages.py -p no:cacheprovider -s
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_reading
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


# Each live part: what the page's hx-get asks for, and the element it swaps.
POLLS = (
    ("candidates", "/candidates/?page=1", "candidates-table"),
    ("connections", "/connections/?page=1", "connections-table"),
    ("a connection", "/connections/claude-max-1/", "connection-status"),
    ("overview", "/", "ladder-status"),
)


def _poll(client: Client, url: str, target: str, etag: str | None) -> Any:
    """A poll as Chromium sends it: htmx's headers, gzip accepted, the kept ETag."""
    headers = {"HX-Request": "true", "HX-Target": target, "Accept-Encoding": "gzip, deflate"}
    if etag:
        headers["If-None-Match"] = etag
    return client.get(url, headers=headers)


def _wire(response: Any) -> str:
    """Status, body bytes as sent, and the header lines' bytes."""
    head = sum(len(f"{name}: {value}\r\n") for name, value in response.items())
    head += sum(
        len(f"Set-Cookie: {morsel.OutputString()}\r\n") for morsel in response.cookies.values()
    )
    return f"{response.status_code} {len(response.content):6} B + {head} B of headers"


def test_measure_poll_bytes(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_demo_world(NOW)
    signed_in(client, "olga", "operator")
    client.get("/")  # the page, as a browser loads it before it polls (its CSRF cookie)
    etags: dict[str, str | None] = {}
    rows: dict[str, list[str]] = {}
    # The first poll (kept), one 7 s later with nothing changed, one after a reading
    # drops claude-max-1 out (every part shows it).
    for moment, change in ((1, False), (8, False), (15, True)):
        monkeypatch.setattr(
            dashboard, "current_time", lambda at=moment: NOW + timedelta(seconds=at)
        )
        if change:
            make_reading("claude-max-1", remaining_percent=0.5, now=NOW + timedelta(seconds=14))
        for name, url, target in POLLS:
            answer = _poll(client, url, target, etags.get(name))
            etags[name] = answer.get("ETag")
            rows.setdefault(name, []).append(_wire(answer))
    print("\nbytes per poll: the first, nothing changed, one change")
    for name, cells in rows.items():
        print(f"  {name:14} " + " | ".join(cells))
