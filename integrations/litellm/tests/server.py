"""The real OmniRoute server for the integration tests: `manage.py migrate`, API tokens
and gunicorn (one worker), run by the PROJECT's Python (its own venv: the server's pins
are never touched by litellm's), on a port the kernel picks; with `worker=True` also a
real Celery worker and beat, as `make run` and production start them.

Database: a fresh PostgreSQL database next to `DATABASE_URL` when that names one (CI),
dropped at the end; else a SQLite file. Broker: `CELERY_BROKER_URL` when it is Redis
(CI; locally e.g. redis://127.0.0.1:6379/6), on a queue of its own that is deleted at
the end; else the filesystem broker in a temporary folder."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

ROOT = Path(__file__).resolve().parents[3]
READY_TIMEOUT = 60.0


def server_python() -> str:
    configured = os.environ.get("OMNIROUTE_SERVER_PYTHON")
    if configured:
        return configured
    return str(ROOT / ".venv" / "bin" / "python")


def wait_for(predicate: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout} s")
        time.sleep(0.05)
    return result


class _Process:
    """A subprocess of the server's Python whose merged output is kept line by line."""

    def __init__(self, argv: list[str], env: dict[str, str], name: str, ready: str) -> None:
        self.name = name
        self.log: list[str] = []
        self.ready_line = ready
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line.rstrip())
            if not self.ready.is_set() and self.ready_line in line:
                self.on_ready(line)
                self.ready.set()

    def on_ready(self, line: str) -> None:
        return

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready.wait(0.1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"{self.name} did not start:\n" + self.tail())

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class _Web(_Process):
    base_url = ""

    def on_ready(self, line: str) -> None:
        self.base_url = line.split("Listening at: ", 1)[1].split()[0]


class OmniRouteServer:
    def __init__(
        self, tmp: Path, extra_env: dict[str, str] | None = None, *, worker: bool = False
    ) -> None:
        self.python = server_python()
        self.tmp = tmp
        key = self._python(
            "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"
        ).strip()
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "VIRTUAL_ENV"))
        }
        self.database_url, self.admin_database_url = self._database(tmp)
        self.broker_url = os.environ.get("CELERY_BROKER_URL", "")
        self.queue = f"omniroute-e2e-{uuid.uuid4().hex[:8]}"
        if not self.broker_url.startswith(("redis://", "rediss://")):
            self.broker_url = "filesystem://"
        self.env.update(
            {
                "PYTHONPATH": str(ROOT),
                "PYTHONUNBUFFERED": "1",
                "DATABASE_URL": self.database_url,
                "DJANGO_DEBUG": "true",
                "OMNIROUTE_CREDENTIAL_KEY": "k1:" + key,
                "CELERY_FILESYSTEM_BROKER_DIR": str(tmp / "broker"),
                "CELERY_BROKER_URL": self.broker_url,
                "CELERY_TASK_DEFAULT_QUEUE": self.queue,
                "BEAT_HEARTBEAT_MAX_AGE_SECONDS": "3600",
                **(extra_env or {}),
            }
        )
        self.env.pop("CELERY_BROKER_URL_OVERRIDE", None)
        (tmp / "broker").mkdir(exist_ok=True)
        self._manage("migrate", "--noinput")
        self.gateway_token = self._manage(
            "create_api_token", "gateway", "--scope", "gateway"
        ).strip()
        self.operator_token = self._manage(
            "create_api_token", "operator", "--scope", "operator"
        ).strip()
        self.processes: list[_Process] = []
        web = _Web(
            [
                self.python,
                "-m",
                "gunicorn",
                # The production server (docs/OPERATIONS.md): on PostgreSQL it answers
                # cached pools and spend reports on its event loop.
                "omniroute_admin.asgi:application",
                "--worker-class",
                "omniroute_admin.worker.Worker",
                "--bind",
                "127.0.0.1:0",
                "--workers",
                "1",
                "--graceful-timeout",
                "5",
            ],
            self.env,
            "gunicorn",
            "Listening at: ",
        )
        self.processes.append(web)
        self.worker: _Process | None = None
        self.beat: _Process | None = None
        if worker:
            self.worker = _Process(
                [
                    self.python,
                    "-m",
                    "celery",
                    "-A",
                    "omniroute_admin",
                    "worker",
                    "--loglevel",
                    "INFO",
                    "--concurrency",
                    "2",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                self.env,
                "celery worker",
                " ready.",
            )
            self.beat = _Process(
                [
                    self.python,
                    "-m",
                    "celery",
                    "-A",
                    "omniroute_admin",
                    "beat",
                    "--loglevel",
                    "INFO",
                    "--schedule",
                    str(tmp / "beat-schedule"),
                ],
                self.env,
                "celery beat",
                "beat: Starting",
            )
            self.processes += [self.worker, self.beat]
        try:
            for process in self.processes:
                process.wait_ready()
        except AssertionError:
            self.stop()
            raise
        self.base_url = web.base_url
        self.web = web

        def healthy() -> bool:
            try:
                return httpx.get(self.base_url + "/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(healthy, READY_TIMEOUT, "gunicorn healthy")

    # -- the database ------------------------------------------------------------------------

    def _database(self, tmp: Path) -> tuple[str, str | None]:
        configured = os.environ.get("DATABASE_URL", "")
        if not configured.startswith(("postgres://", "postgresql://")):
            return f"sqlite:///{tmp / 'omniroute.sqlite3'}", None
        parts = urlsplit(configured)
        name = f"{parts.path.lstrip('/') or 'omniroute'}_e2e_{uuid.uuid4().hex[:8]}"
        admin = urlunsplit(parts._replace(path="/postgres"))
        self._python(
            "import sys, psycopg\n"
            "with psycopg.connect(sys.argv[1], autocommit=True) as c:\n"
            "    c.execute('CREATE DATABASE \"' + sys.argv[2] + '\"')",
            admin,
            name,
        )
        return urlunsplit(parts._replace(path="/" + name)), admin

    def _drop_database(self) -> None:
        if self.admin_database_url is None:
            return
        name = urlsplit(self.database_url).path.lstrip("/")
        self._python(
            "import sys, psycopg\n"
            "with psycopg.connect(sys.argv[1], autocommit=True) as c:\n"
            "    c.execute('DROP DATABASE IF EXISTS \"' + sys.argv[2] + '\" WITH (FORCE)')",
            self.admin_database_url,
            name,
        )

    def _drop_queue(self) -> None:
        """Delete this server's queue from a Redis broker, with its parked messages."""
        if not self.broker_url.startswith(("redis://", "rediss://")):
            return
        self._python(
            "import json, sys, redis\n"
            "r = redis.Redis.from_url(sys.argv[1]); queue = sys.argv[2]\n"
            "for tag, raw in r.hgetall('unacked').items():\n"
            "    if json.loads(raw)[2] == queue:\n"
            "        r.hdel('unacked', tag); r.zrem('unacked_index', tag)\n"
            "keys = [*r.scan_iter(match='*' + queue + '*')]\n"
            "if keys: r.delete(*keys)",
            self.broker_url,
            self.queue,
        )

    # -- helpers -----------------------------------------------------------------------------

    def _python(self, code: str, *args: str) -> str:
        done = subprocess.run(
            [self.python, "-c", code, *args], check=True, capture_output=True, text=True
        )
        return done.stdout

    def _manage(self, *args: str) -> str:
        done = subprocess.run(
            [self.python, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
            )
        return done.stdout

    @property
    def log(self) -> list[str]:
        return [line for process in self.processes for line in process.log]

    def api(
        self, method: str, path: str, body: Any = None, *, operator: bool = True
    ) -> httpx.Response:
        token = self.operator_token if operator else self.gateway_token
        return httpx.request(
            method,
            f"{self.base_url}/api/v1{path}",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )

    def ledger(self, connection_prefix: str = "") -> list[dict[str, Any]]:
        """The spend ledger's rows (oldest first), through `GET /api/v1/spend`."""
        rows: list[dict[str, Any]] = []
        path = "/spend?limit=500"
        while path:
            answer = self.api("GET", path)
            assert answer.status_code == 200, answer.text
            rows += answer.json()
            cursor = answer.headers.get("x-next-cursor")
            path = f"/spend?limit=500&cursor={cursor}" if cursor else ""
        rows = [r for r in rows if str(r["connection_id"]).startswith(connection_prefix)]
        return rows[::-1]

    def refreshes(self, connection_id: str) -> int:
        """How many polls of the connection's quota source the worker logged."""
        line = f"refresh {connection_id}: polled"
        return sum(1 for entry in list(self.worker.log if self.worker else []) if line in entry)

    def worker_log(self, lines: int = 60) -> str:
        return "\n\n".join(f"--- {p.name} ---\n{p.tail(lines)}" for p in self.processes[1:])

    def stop(self) -> None:
        for process in self.processes:
            if process.process.poll() is None:
                process.process.terminate()
        for process in self.processes:
            process.stop()
        try:
            self._drop_queue()
        finally:
            self._drop_database()
