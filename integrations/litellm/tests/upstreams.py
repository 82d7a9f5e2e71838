"""Local fake upstreams in the Anthropic-messages and OpenAI-chat shapes.

Each serves `capacity` requests per window of `window_seconds` (windows aligned to
multiples of the length in epoch seconds, so the reset is a whole second, as Anthropic
sends it), then answers 429 with real-shaped headers until the window ends. Each keeps
its own bill: the requests it served and their tokens. `GET /api/oauth/usage` answers
what Claude's usage endpoint would (the window's utilization and reset), so OmniRoute's
quota adapter, polled by a real Celery worker, reads the same plan the requests use."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

INPUT_TOKENS = 100
OUTPUT_TOKENS = 20
USAGE_PATH = "/api/oauth/usage"


class FakeUpstream:
    def __init__(
        self,
        shape: str,
        *,
        capacity: int = 1_000_000,
        window_seconds: int = 3600,
        clock: Callable[[], float] = time.time,
        fixed_reset: float | None = None,
    ) -> None:
        assert shape in ("anthropic", "openai")
        # A window that resets at this instant (epoch seconds) instead of on the grid:
        # plan seats whose weekly windows reset on different days.
        self.fixed_reset = fixed_reset
        # The prompt cache: the conversation (`x-test-conversation`) of each request served.
        self.conversations: list[str | None] = []
        self.shape = shape
        self.capacity = capacity
        self.window_seconds = window_seconds
        self.clock = clock
        self.lock = threading.Lock()
        self.window = -1
        self.used = 0
        self.served: list[float] = []  # when each served request was answered
        self.refused = 0
        self.usage_polls: list[float] = []  # when the usage endpoint was asked
        # Headers added to every successful answer (an account that bills past its plan
        # says so: `anthropic-ratelimit-unified-overage-in-use: true`).
        self.extra_headers: dict[str, str] = {}
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes: without this, Nagle's algorithm and
            # the client's delayed ACK add about 40 ms to every answer on loopback.
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                status, headers, body = upstream.answer(request)
                if status == 200:
                    with upstream.lock:
                        upstream.conversations.append(self.headers.get("x-test-conversation"))
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {**headers, "Content-Type": "application/json"}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                status, body = (
                    (200, upstream.usage()) if self.path == USAGE_PATH else (404, {"error": "?"})
                )
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def usage_url(self) -> str:
        return self.base_url + USAGE_PATH

    def reset_at(self, now: float) -> int:
        if self.fixed_reset is not None:
            return math.ceil(self.fixed_reset)
        return (math.floor(now / self.window_seconds) + 1) * self.window_seconds

    def _roll(self, now: float) -> None:
        window = math.floor(now / self.window_seconds)
        if window != self.window:
            self.window, self.used = window, 0

    def usage(self) -> dict[str, Any]:
        """Claude's usage payload: the window's utilization (percent used) and reset."""
        with self.lock:
            now = self.clock()
            self._roll(now)
            self.usage_polls.append(now)
            utilization = 100.0 * self.used / self.capacity if self.capacity else 100.0
            resets_at = datetime.fromtimestamp(self.reset_at(now), UTC).isoformat()
        return {"five_hour": {"utilization": utilization, "resets_at": resets_at}}

    def clear(self) -> None:
        """A new bill (a test of its own on a module's upstream)."""
        with self.lock:
            self.window, self.used, self.served, self.refused = -1, 0, [], 0
            self.usage_polls = []
            self.conversations = []

    def answer(self, request: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        with self.lock:
            now = self.clock()
            self._roll(now)
            reset = self.reset_at(now)
            if self.used >= self.capacity:
                self.refused += 1
                return self._refusal(now, reset)
            self.used += 1
            self.served.append(now)
            used_fraction = self.used / self.capacity
        return self._success(request, used_fraction, reset)

    def _refusal(self, now: float, reset: int) -> tuple[int, dict[str, str], dict[str, Any]]:
        retry = str(max(1, math.ceil(reset - now)))
        if self.shape == "anthropic":
            headers = {
                "anthropic-ratelimit-unified-status": "rejected",
                "anthropic-ratelimit-unified-reset": str(reset),
                "anthropic-ratelimit-unified-5h-status": "rejected",
                "anthropic-ratelimit-unified-5h-utilization": "1.0",
                "anthropic-ratelimit-unified-5h-reset": str(reset),
                "retry-after": retry,
            }
            body: dict[str, Any] = {
                "type": "error",
                "error": {"type": "rate_limit_error", "message": "Rate limited"},
            }
        else:
            headers = {"retry-after": retry, "x-ratelimit-remaining-requests": "0"}
            body = {
                "error": {
                    "type": "requests",
                    "code": "rate_limit_exceeded",
                    "message": "Rate limit reached",
                }
            }
        return 429, headers, body

    def _success(
        self, request: dict[str, Any], used_fraction: float, reset: int
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        model = str(request.get("model", "model"))
        if self.shape == "anthropic":
            headers = {
                "anthropic-ratelimit-unified-status": "allowed",
                "anthropic-ratelimit-unified-reset": str(reset),
                "anthropic-ratelimit-unified-5h-status": "allowed",
                "anthropic-ratelimit-unified-5h-utilization": f"{used_fraction:.4f}",
                "anthropic-ratelimit-unified-5h-reset": str(reset),
                **self.extra_headers,
            }
            body: dict[str, Any] = {
                "id": f"msg_{len(self.served)}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS},
            }
        else:
            headers = {}
            body = {
                "id": f"chatcmpl-{len(self.served)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": INPUT_TOKENS,
                    "completion_tokens": OUTPUT_TOKENS,
                    "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
                },
            }
        return 200, headers, body

    def served_count(self) -> int:
        with self.lock:
            return len(self.served)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
