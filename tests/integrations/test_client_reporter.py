"""The client's background reporter against a local HTTP server that answers as the
control plane does when it is slow or down (503, `{"detail": ...}`, Retry-After), when the
gateway token is revoked (401), and as a server that predates `observed_at`: no report
is lost (each is sent again until acknowledged, and survives the process in the spool
file), none is counted as sent before it was acknowledged, none lands twice."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from omniroute_client.reporter import Reporter, _retry_after, backoff

UNAVAILABLE = {"detail": "The request did not finish within its deadline; retry."}


class ControlPlane(ThreadingHTTPServer):
    """Answers each POST with the next scripted status (then 200), recording bodies. An
    event carrying `refused_field` is answered with a per-entry error naming it."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script: list[int] = []
        self.received: list[tuple[str, Any]] = []
        self.refused_field: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: ControlPlane

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append((self.path, body))
        status = self.server.script.pop(0) if self.server.script else 200
        field = self.server.refused_field
        if status == 503:
            answer: Any = UNAVAILABLE
        elif status == 401:
            answer = {"detail": "Invalid or revoked token"}
        elif self.path == "/spend/batch":
            entries = body["entries"]
            answer = {"created": len(entries), "duplicates": 0, "results": [{}] * len(entries)}
        else:
            answer = {
                "results": [
                    {"error": f"Invalid event: {field}: Extra inputs are not permitted"}
                    if field and field in event
                    else {"connection_id": event["connection_id"]}
                    for event in body.get("events", [])
                ]
            }
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


def _reporter(plane: ControlPlane, **options: Any) -> Reporter:
    options.setdefault("flush_interval", 0.01)
    return Reporter(httpx.Client(base_url=plane.url), retry_wait=0.01, **options)


@pytest.fixture
def reporter(plane: ControlPlane, landed: list[str]) -> Iterator[Reporter]:
    made = _reporter(plane, on_landed=lambda kind, _: landed.append(kind))
    yield made
    made.close()


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
    assert (reporter.metrics["retried"], reporter.metrics["sent"]) == (6, 3)


def test_spend_is_sent_again_until_acknowledged_however_long_the_outage(
    plane: ControlPlane, reporter: Reporter, landed: list[str]
) -> None:
    plane.script = [503] * 6
    reporter.put("spend", _spend(1))
    reporter.put("spend", _spend(2))
    assert reporter.flush()
    assert len(plane.received) == 7
    assert (reporter.sent, reporter.dropped, landed) == ({"spend": 2, "event": 0}, 0, ["spend"])
    assert reporter.pending() == 0


def test_a_revoked_token_is_never_counted_as_sent(
    plane: ControlPlane, reporter: Reporter, landed: list[str]
) -> None:
    plane.script = [401, 401, 401]
    reporter.put("spend", _spend(1))
    assert reporter.flush()  # the fourth answer is a 200 (the token fixed)
    assert len(plane.received) == 4
    assert reporter.metrics["token_rejected"] == 3
    assert (reporter.metrics["sent"], reporter.dropped, landed) == (1, 0, ["spend"])


def test_a_report_refused_for_good_is_counted_rejected_not_sent(
    plane: ControlPlane, reporter: Reporter
) -> None:
    plane.script = [422]
    reporter.put("spend", _spend(1))
    assert reporter.flush()
    assert len(plane.received) == 1
    assert (reporter.metrics["rejected"], reporter.metrics["sent"]) == (1, 0)


def test_single_spend_reports_are_sent_again_when_refused(
    plane: ControlPlane, reporter: Reporter
) -> None:
    reporter.batch_endpoints["spend"] = False  # a server without the batch endpoint
    plane.script = [200, 503]  # the second report refused once
    reporter.put("spend", _spend(1))
    reporter.put("spend", _spend(2))
    assert reporter.flush()
    assert plane.received == [
        ("/spend", _spend(1)),
        ("/spend", _spend(2)),
        ("/spend", _spend(2)),  # the first was acknowledged: only the refused one again
    ]
    assert (reporter.sent, reporter.dropped) == ({"spend": 2, "event": 0}, 0)


def test_an_event_answered_503_is_sent_again_with_the_same_event_id(
    plane: ControlPlane, reporter: Reporter
) -> None:
    plane.script = [503]
    reporter.put("event", {"connection_id": "key-1", "kind": "rate_limited"})
    assert reporter.flush()
    assert [path for path, _ in plane.received] == ["/events/batch"] * 2
    first, second = (body["events"] for _, body in plane.received)
    assert first == second
    assert len(first) == 1
    assert len(first[0]["event_id"]) == 32
    assert reporter.sent == {"spend": 0, "event": 1}


def test_headers_only_successes_are_coalesced_per_connection(plane: ControlPlane) -> None:
    reporter = _reporter(plane, flush_interval=60.0)  # nothing is taken before flush()
    try:
        for n in range(3):
            for connection in ("plan-1", "plan-2"):
                reporter.put(
                    "event",
                    {"connection_id": connection, "kind": "success", "headers": {"n": str(n)}},
                    invalidates=False,
                    coalesce_key=f"success:{connection}",
                )
        reporter.put("event", {"connection_id": "plan-1", "kind": "error"})
        assert reporter.flush()
    finally:
        reporter.close()
    (path, body), *more = plane.received
    assert (path, more) == ("/events/batch", [])
    assert [(e["connection_id"], e["kind"], e.get("headers")) for e in body["events"]] == [
        ("plan-1", "success", {"n": "2"}),
        ("plan-2", "success", {"n": "2"}),
        ("plan-1", "error", None),
    ]
    assert (reporter.metrics["coalesced"], reporter.metrics["sent"]) == (4, 3)


def test_reports_left_at_close_are_sent_by_the_next_client_on_the_spool(
    plane: ControlPlane, tmp_path: Path
) -> None:
    spool = str(tmp_path / "spool.sqlite3")
    plane.script = [503] * 1000  # down for the first process's whole life
    first = _reporter(plane, spool_path=spool)
    first.put("spend", _spend(1))
    first.put("event", {"connection_id": "key-1", "kind": "error"})
    assert first.close(timeout=0.3) is False
    assert (first.sent, first.dropped) == ({"spend": 0, "event": 0}, 0)

    plane.script = []  # back
    second = _reporter(plane, spool_path=spool)
    try:
        assert second.flush()
    finally:
        second.close()
    assert second.sent == {"spend": 1, "event": 1}
    assert plane.received[-1] == ("/spend/batch", {"entries": [_spend(1)]})


def test_a_full_spool_drops_the_new_report_and_counts_it(plane: ControlPlane) -> None:
    reporter = _reporter(plane, max_queue=2, flush_interval=60.0)
    try:
        assert [reporter.put("spend", _spend(n)) for n in range(3)] == [True, True, False]
        assert reporter.flush()
    finally:
        reporter.close()
    assert (reporter.sent["spend"], reporter.dropped) == (2, 1)


def test_an_older_server_gets_events_without_the_newer_fields(
    plane: ControlPlane, reporter: Reporter
) -> None:
    plane.refused_field = "observed_at"
    reporter.put(
        "event",
        {"connection_id": "key-1", "kind": "error", "observed_at": "2026-12-01T12:00:00+00:00"},
    )
    assert reporter.flush()
    (_, first), (_, second) = plane.received
    assert "observed_at" in first["events"][0]
    assert second == {"events": [{"connection_id": "key-1", "kind": "error"}]}
    assert (reporter.sent["event"], reporter.metrics["rejected"]) == (1, 0)


def test_retry_after_is_read_in_seconds_and_capped() -> None:
    def answer(value: str | None) -> httpx.Response:
        return httpx.Response(503, headers={} if value is None else {"Retry-After": value})

    assert [_retry_after(answer(v)) for v in ("1", "0.5", "7", "99", "-3", "soon", None)] == [
        1.0,
        0.5,
        7.0,
        30.0,
        0.0,
        None,
        None,
    ]


def test_backoff_doubles_to_its_cap_and_honours_a_longer_retry_after() -> None:
    assert [backoff(n) for n in (1, 2, 3, 9, 20)] == [0.2, 0.4, 0.8, 30.0, 30.0]
    assert backoff(1, 3.0) == 3.0


def test_closing_twice_answers_the_same_and_changes_nothing(
    plane: ControlPlane, reporter: Reporter
) -> None:
    reporter.put("spend", _spend(1))

    first = reporter.close()
    second = reporter.close()

    assert (first, second) == (True, True)
    assert (reporter.sent, len(plane.received)) == ({"spend": 1, "event": 0}, 1)
    assert (reporter.pending(), reporter.flush()) == (0, True)  # the spool file is closed
    assert reporter.put("spend", _spend(2)) is False  # closed: refused, counted dropped
    assert reporter.dropped == 1


def test_events_go_in_batches_of_at_most_the_servers_maximum_of_100(
    plane: ControlPlane,
) -> None:
    reporter = _reporter(plane, flush_interval=60.0)  # nothing sent before the flush
    try:
        for n in range(250):
            reporter.put("event", {"connection_id": f"c-{n}", "kind": "error"})

        assert reporter.flush()
    finally:
        reporter.close()

    assert [len(body["events"]) for _, body in plane.received] == [100, 100, 50]
    assert reporter.sent == {"spend": 0, "event": 250}
