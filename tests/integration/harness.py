"""Harness shared by the integration tests and the benchmarks: a real Celery worker (with
beat) as a subprocess, a scripted fake usage endpoint on 127.0.0.1, and `wait_until`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
WORKER_READY_TIMEOUT = 60.0


def wait_until(predicate: Callable[[], Any], *, timeout: float, interval: float = 0.05) -> Any:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds.

    This awaits an observable outcome (a row written by another process); it is not a
    sleep standing in for one."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


class ScriptedUpstream:
    """An HTTP server on 127.0.0.1 answering each request with `script(path)`, which
    returns (status, JSON-able body). Records the paths it was asked for."""

    def __init__(self) -> None:
        self.script: Callable[[str], tuple[int, Any]] = lambda path: (404, {"error": "unset"})
        self.calls: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                with upstream.lock:
                    upstream.calls.append((time.time(), self.path))
                status, body = upstream.script(self.path)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def call_count(self) -> int:
        with self.lock:
            return len(self.calls)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def database_url() -> str:
    """A DATABASE_URL naming the database this process uses (the test one in tests)."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


class Worker:
    """A `celery -A omniroute_admin worker --beat` subprocess."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.log: list[str] = []
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "omniroute_admin",
                "worker",
                "--beat",
                "--loglevel",
                "INFO",
                "--concurrency",
                "2",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-s",
                str(tmp / "beat-schedule"),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self.ready.wait(WORKER_READY_TIMEOUT):
            self.stop()
            raise AssertionError("the worker did not start:\n" + "\n".join(self.log[-40:]))

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line.rstrip())
            if " ready." in line:
                self.ready.set()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
