"""The client's background reporter against a local HTTP server that answers as the
control plane does when its database is slow (503, `{"detail": ...}`, Retry-After):
refused spend is sent again and lands once; spend still refused after the last attempt
is dropped and counted, never counted as sent; an event is not sent twice."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from omniroute_client.reporter import SEND_ATTEMPTS, Reporter, _retry_after

UNAVAILABLE = {"detail": "The request did not finish within its deadline; retry."}


class ControlPlane(ThreadingHTTPServer):
    """Answers each POST with the next scripted status (then 200), recording bodies."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script: list[int] = []
        self.received: list[tuple[str, Any]] = []


class Handler(BaseHTTPRequestHandler):
    server: ControlPlane

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append((self.path, body))
        status = self.server.script.pop(0) if self.server.script else 200
        if status == 503:
            answer: Any = UNAVAILABLE
        elif self.path == "/spend/batch":
            answer = {"created": len(body["entries"]), "duplicates": 0, "results": []}
        else:
            answer = {"results": []}
        payload = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if status == 503:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def plane() -> Iterator[ControlPlane]:
    server = ControlPlane()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def landed() -> list[str]:
    return []


@pytest.fixture
def reporter(plane: ControlPlane, landed: list[str]) -> Iterator[Reporter]:
    http = httpx.Client(base_url=f"http://127.0.0.1:{plane.server_address[1]}")
    made = Reporter(http, flush_interval=0.01, on_landed=lambda kind, _: landed.append(kind))
    yield made
    made.close()
    http.close()


def _spend(n: int) -> dict[str, Any]:
    return {"request_id": f"r-{n}", "connection_id": "key-1", "provider": "openai",
            "model": "gpt-4o-mini", "cost_usd": 0.01}  # fmt: skip


def test_spend_refused_with_a_503_is_sent_again_and_counted_once(
    plane: ControlPlane, reporter: Reporter, landed: list[str]
) -> None:
    plane.script = [503, 503]
    for n in range(3):
        reporter.put("spend", _spend(n))
    assert reporter.flush()
    bodies = [body for path, body in plane.received]
    assert [path for path, _ in plane.received] == ["/spend/batch"] * 3
    assert bodies[0] == bodies[1] == bodies[2] == {"entries": [_spend(n) for n in range(3)]}
    assert (reporter.sent, reporter.dropped, landed) == ({"spend": 3, "event": 0}, 0, ["spend"])


def test_spend_refused_at_every_attempt_is_dropped_and_counted_not_sent(
    plane: ControlPlane, reporter: Reporter, landed: list[str]
) -> None:
    plane.script = [503] * SEND_ATTEMPTS
    reporter.put("spend", _spend(1))
    reporter.put("spend", _spend(2))
    assert reporter.flush()
    assert len(plane.received) == SEND_ATTEMPTS == 3
    assert (reporter.sent, reporter.dropped, landed) == ({"spend": 0, "event": 0}, 2, [])


def test_single_spend_reports_are_sent_again_when_refused(
    plane: ControlPlane, reporter: Reporter
) -> None:
    reporter.batch_endpoints["spend"] = False  # a server without the batch endpoint
    plane.script = [200, 503]  # the second report refused once: the batch sent again whole
    reporter.put("spend", _spend(1))
    reporter.put("spend", _spend(2))
    assert reporter.flush()
    assert plane.received == [
        ("/spend", _spend(1)),
        ("/spend", _spend(2)),
        ("/spend", _spend(1)),  # lands once: its request_id is seen before
        ("/spend", _spend(2)),
    ]
    assert (reporter.sent, reporter.dropped) == ({"spend": 2, "event": 0}, 0)


def test_an_event_answered_503_is_not_sent_twice(plane: ControlPlane, reporter: Reporter) -> None:
    plane.script = [503]
    reporter.put("event", {"connection_id": "key-1", "kind": "rate_limited"})
    assert reporter.flush()
    assert [path for path, _ in plane.received] == ["/events/batch"]


def test_retry_after_is_read_in_seconds_and_capped() -> None:
    def answer(value: str | None) -> httpx.Response:
        return httpx.Response(503, headers={} if value is None else {"Retry-After": value})

    assert [_retry_after(answer(v)) for v in ("1", "0.5", "7", "-3", "soon", None)] == [
        1.0,
        0.5,
        5.0,
        0.0,
        None,
        None,
    ]
