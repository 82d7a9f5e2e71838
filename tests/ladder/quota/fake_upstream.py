"""A real HTTP fake upstream on 127.0.0.1 for the fetch tests, configured per test."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Long enough for any client timeout under test, short enough that a bug cannot hang CI.
HOLD_LIMIT_SECONDS = 10.0


@dataclass
class Reply:
    """What the fake upstream answers to the next requests."""

    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    is_held: bool = False


@dataclass(frozen=True)
class Received:
    """One request as the fake upstream saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeUpstream:
    """A threaded HTTP server whose answer each test sets, recording what it receives."""

    def __init__(self) -> None:
        self.reply = Reply()
        self.received: list[Received] = []
        # Held replies wait on this; the fixture sets it at teardown, so no test sleeps.
        self.release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval keeps shutdown (once per test) from costing half a second.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def url(self, path: str = "/") -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}{path}"

    def respond(
        self,
        *,
        status: int = 200,
        body: bytes | str = b"{}",
        headers: dict[str, str] | None = None,
        is_held: bool = False,
    ) -> None:
        encoded = body.encode() if isinstance(body, str) else body
        self.reply = Reply(
            status=status,
            body=encoded,
            headers={"Content-Type": "application/json"} if headers is None else headers,
            is_held=is_held,
        )

    def respond_json(self, payload: Any, *, status: int = 200) -> None:
        self.respond(status=status, body=json.dumps(payload))


def _handler_for(upstream: FakeUpstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            upstream.received.append(
                Received(
                    method=self.command,
                    path=self.path,
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=self.rfile.read(length),
                )
            )
            reply = upstream.reply
            if reply.is_held:
                upstream.release.wait(HOLD_LIMIT_SECONDS)
            try:
                # send_response_only: no automatic Date/Server, so a test's Date is the only one.
                self.send_response_only(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests): nothing left to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

    return Handler
