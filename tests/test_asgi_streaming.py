"""A streaming answer under the ASGI server (omniroute_admin/asgi.py, BufferedWSGI) is
sent as it is made, in bounded pieces, never gathered whole first: the CSV exports of the
spend ledger (once: 89.6 s to the first byte and 465 MB at 1,000,000 rows)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from ladder.models import ApiToken, SpendEntry
from omniroute_admin.asgi import STREAM_PIECE, BufferedWSGI
from tests.ladder.factories import make_connection, make_token

# Released by the test once the first piece has been sent: the rest of the answer is
# made only after it (bounded, so a regression fails instead of hanging).
LIMIT = 10.0


class GatedAnswer:
    """A streaming WSGI answer: one piece, then the rest once `gate` is set."""

    streaming = True

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.opened_after_first_piece = False
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield b"a" * STREAM_PIECE
        self.opened_after_first_piece = self.gate.wait(LIMIT)
        yield b"b" * 10

    def close(self) -> None:
        self.closed = True


def _scope(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path.split("?")[0],
        "raw_path": path.split("?")[0].encode(),
        "query_string": path.partition("?")[2].encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *(headers or [])],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


def test_a_streaming_answer_sends_its_first_piece_before_the_rest_is_made() -> None:
    gate = threading.Event()
    answer = GatedAnswer(gate)

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        start_response("200 OK", [("Content-Type", "text/csv")])
        return answer

    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)
        if message["type"] == "http.response.body" and message.get("more_body"):
            gate.set()  # the first piece is out: let the rest be made

    async def main() -> None:
        await BufferedWSGI(app, 1)(_scope("/export"), _receive, send)

    asyncio.run(main())

    assert [m["type"] for m in messages] == [
        "http.response.start",
        "http.response.body",
        "http.response.body",
    ]
    assert messages[0]["status"] == 200
    assert (messages[1]["body"], messages[1]["more_body"]) == (b"a" * STREAM_PIECE, True)
    assert (messages[2]["body"], messages[2].get("more_body", False)) == (b"b" * 10, False)
    assert answer.opened_after_first_piece
    assert answer.closed


@pytest.mark.django_db(transaction=True)
def test_the_spend_csv_export_under_asgi_is_sent_in_bounded_pieces_and_whole() -> None:
    make_connection("key", provider="openai", auth_type="apikey")
    now = timezone.now()
    rows = 3000
    SpendEntry.objects.bulk_create(
        SpendEntry(
            request_id=f"r{index}",
            connection_id="key",
            provider="openai",
            model="gpt-4o-mini",
            rung="cheap",
            cost_usd=Decimal("0.01"),
            billed_usd=Decimal("0.01"),
            list_price_usd=Decimal("0.01"),
            is_cost_computed=False,
            occurred_at=now - timedelta(seconds=index),
        )
        for index in range(rows)
    )
    secret = make_token("gw", ApiToken.Scope.GATEWAY)
    from omniroute_admin import asgi

    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    async def main() -> None:
        auth = [(b"authorization", f"Bearer {secret}".encode())]
        await asgi.application(_scope("/api/v1/spend?format=csv", auth), _receive, send)

    asyncio.run(main())

    bodies = [m for m in messages if m["type"] == "http.response.body"]
    assert messages[0]["status"] == 200
    assert len(bodies) >= 3
    assert all(m["more_body"] for m in bodies[:-1])
    assert max(len(m["body"]) for m in bodies) < 2 * STREAM_PIECE
    lines = b"".join(m["body"] for m in bodies).decode().splitlines()
    assert len(lines) == rows + 1
    assert lines[1].split(",")[1] == "r0"  # newest first
