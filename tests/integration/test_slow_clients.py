"""Slow clients against the production server command (gunicorn with the project's worker
class, omniroute_admin/worker.py): a connection that has not sent a whole request,
headers and body, within REQUEST_READ_TIMEOUT_SECONDS is closed, and a request cut short
never runs (issue #30: 2,000 slow unauthenticated sockets were held for good). The
deadline is 1 s here; every test awaits the close itself (`recv` returning b""), and a
bound on the number of drips only stops a test that would otherwise wait forever."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Iterator
from decimal import Decimal
from urllib.parse import urlsplit

import pytest
from django.db import connections

from billing import services as billing_services
from ladder.models import ApiToken, SpendEntry
from ladder.tokens import create_token
from tests.integration.harness import http_call
from tests.integration.test_change_feed import ASGI, FeedServer
from tests.ladder.factories import make_connection

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DRIP_SECONDS = 0.2  # between two pieces of a slow request
MAX_DRIPS = 300  # a minute of drips: the server that never closes fails the test


@pytest.fixture
def server() -> Iterator[FeedServer]:
    connections.close_all()
    # One thread runs every request, in order: a request made after another was cut
    # short is answered after the application would have run the first.
    made = FeedServer(ASGI, "asgi", REQUEST_READ_TIMEOUT_SECONDS="1", ASGI_WSGI_THREADS="1")
    try:
        made.wait_ready()
        yield made
    finally:
        made.stop()


def _connect(server: FeedServer) -> socket.socket:
    parts = urlsplit(server.url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80))
    sock.settimeout(DRIP_SECONDS)
    return sock


def _drip_until_closed(sock: socket.socket, pieces: Iterable[bytes]) -> bytes:
    """Send `pieces` one at a time, each after the server stayed silent for
    DRIP_SECONDS, until it closes the connection: what it sent before closing."""
    received = b""
    for piece in pieces:
        try:
            sock.sendall(piece)
            data = sock.recv(65536)
        except TimeoutError:
            continue  # still open and silent: the next piece
        except (BrokenPipeError, ConnectionResetError):
            return received
        if data == b"":
            return received
        received += data
    raise AssertionError(f"still open after {MAX_DRIPS} drips; it sent {received!r}")


def _whole_response(sock: socket.socket) -> bytes:
    """One whole response, headers and the body its Content-Length announces (the body
    may come in a segment of its own)."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, body = received.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        more = sock.recv(65536)
        body += more
        received += more
    return received


def _forever(first: bytes, then: bytes) -> Iterator[bytes]:
    yield first
    for _ in range(MAX_DRIPS):
        yield then


def test_a_connection_that_drips_its_headers_is_closed_without_an_answer(
    server: FeedServer,
) -> None:
    with _connect(server) as sock:
        start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        assert _drip_until_closed(sock, _forever(start, b"a")) == b""


def test_a_connection_that_sends_nothing_is_closed(server: FeedServer) -> None:
    with _connect(server) as sock:
        sock.settimeout(MAX_DRIPS * DRIP_SECONDS)
        assert sock.recv(1) == b""


def test_a_kept_alive_connection_gets_the_same_deadline_for_its_next_request(
    server: FeedServer,
) -> None:
    with _connect(server) as sock:
        sock.settimeout(10)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = _whole_response(sock)  # its body may come in a segment of its own
        assert first.startswith(b"HTTP/1.1 200 ")
        sock.settimeout(DRIP_SECONDS)
        assert _drip_until_closed(sock, _forever(b"GET /healthz HTTP/1.1\r\nX: ", b"a")) == b""


def test_a_body_cut_short_by_the_deadline_is_never_applied(server: FeedServer) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    billing_services.upsert_price(
        billing_services.PriceInput("openai", "gpt-4o-mini", Decimal("0.15"), Decimal("0.6"), None),
        actor="t",
    )
    token = create_token("gateway", ApiToken.Scope.GATEWAY)[1]
    entry = {
        "request_id": "slow-1",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 0.25,
    }
    body = json.dumps(entry).encode()
    # The whole entry at once, then the spaces its declared length still owes, slowly:
    # cut anywhere after the entry, the body read so far is valid JSON.
    head = (
        b"POST /api/v1/spend HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: " + str(len(body) + MAX_DRIPS + 1).encode() + b"\r\n\r\n"
    )
    connections.close_all()
    with _connect(server) as sock:
        assert _drip_until_closed(sock, _forever(head + body, b" ")) == b""
    assert http_call(server.url, "GET", "/healthz").status == 200  # run after it, if it ran

    assert not SpendEntry.objects.filter(request_id="slow-1").exists()
    # The same entry sent whole is applied: the server and the entry are fine.
    sent = http_call(server.url, "POST", "/api/v1/spend", token=token, body=entry)
    assert sent.status in (200, 201)
    assert SpendEntry.objects.filter(request_id="slow-1").count() == 1


def test_an_answer_that_takes_longer_than_the_deadline_is_still_sent(
    server: FeedServer,
) -> None:
    token = create_token("gateway", ApiToken.Scope.GATEWAY)[1]
    config, state = billing_services.change_counters()
    connections.close_all()
    # The request is whole at once; the server holds its answer 2 s (the wait).
    answer = http_call(
        server.url, "GET", f"/api/v1/changes?after={config}.{state}&wait=2", token=token
    )
    assert (answer.status, answer.json()) == (200, {"version": f"{config}.{state}"})
