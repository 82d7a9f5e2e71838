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


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a server process under test: this one's (pytest's own
    variables left out) on the test database, production-like settings, and a request
    deadline no loaded machine turns into a 503; `extra` on top."""
    import os

    from tests.conftest import TEST_CREDENTIAL_KEY

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        {
            "DATABASE_URL": database_url(),
            "OMNIROUTE_CREDENTIAL_KEY": TEST_CREDENTIAL_KEY,
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": "integration-" + "s" * 50,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "BEAT_HEARTBEAT_MAX_AGE_SECONDS": "600",
            "API_REQUEST_DEADLINE_SECONDS": "10",
            "PYTHONUNBUFFERED": "1",
            **extra,
        }
    )
    return env


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
                # Both queues in one process here: refreshes and webhook deliveries (a
                # test's own default queue when its env names one).
                "-Q",
                ",".join(
                    (
                        env.get("CELERY_TASK_DEFAULT_QUEUE", "omniroute"),
                        env.get("CELERY_NOTIFICATIONS_QUEUE", "omniroute-notifications"),
                    )
                ),
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


# --- Scaling out: several web processes and workers (used by test_scale_out.py) ---------
# Appended below the original harness; nothing above is changed.

SERVER_READY_TIMEOUT = 30.0
# An upstream call waits at most this long on a closed gate (a failed test never hangs).
GATE_TIMEOUT = 30.0


def _bearer_credential(authorization: str) -> str:
    scheme, _, credential = authorization.partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else ""


class GatedUpstream:
    """A fake usage endpoint shared by many connections, which it tells apart by their
    bearer credential. Each call is answered with `script(credential)` (status, JSON-able
    body) and recorded; while the gate is closed, calls wait inside the server, so the
    polls that made them stay in flight until `open_gate()`."""

    def __init__(self, script: Callable[[str], tuple[int, Any]]) -> None:
        self.script = script
        self.started: list[tuple[str, float]] = []
        # (credential, started, answered): `answered` is stamped before the answer is
        # written, so no later step of the poll that made the call can precede it.
        self.answered: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                credential = _bearer_credential(self.headers.get("Authorization", ""))
                started = time.monotonic()
                with upstream.lock:
                    upstream.started.append((credential, started))
                upstream.gate.wait(GATE_TIMEOUT)
                status, body = upstream.script(credential)
                data = json.dumps(body).encode()
                with upstream.lock:
                    upstream.answered.append((credential, started, time.monotonic()))
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

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close_gate(self) -> None:
        self.gate.clear()

    def open_gate(self) -> None:
        self.gate.set()

    def calls_of(self, credential: str) -> int:
        """How many calls were made with this credential (answered or in flight)."""
        with self.lock:
            return sum(1 for caller, _ in self.started if caller == credential)

    def credentials_in_flight(self) -> set[str]:
        """Credentials whose call has started and not been answered yet."""
        with self.lock:
            answered = {(credential, started) for credential, started, _ in self.answered}
            return {c for c, started in self.started if (c, started) not in answered}

    def overlapping_calls(self) -> list[str]:
        """Credentials with two calls in flight at once (answered calls only)."""
        with self.lock:
            calls = sorted(self.answered, key=lambda call: call[1])
        overlapping: list[str] = []
        last_answer: dict[str, float] = {}
        for credential, started, answered in calls:
            if started < last_answer.get(credential, started):
                overlapping.append(credential)
            last_answer[credential] = max(answered, last_answer.get(credential, answered))
        return overlapping

    def stop(self) -> None:
        self.open_gate()
        self.server.shutdown()
        self.server.server_close()


class _Process:
    """A subprocess of this project whose merged output is collected line by line."""

    def __init__(self, argv: list[str], env: dict[str, str], name: str) -> None:
        self.name = name
        self.log: list[str] = []
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line.rstrip())
            self.on_line(line)

    def on_line(self, line: str) -> None:
        return

    def wait_ready(self) -> None:
        return

    def wait_for(self, event: threading.Event, what: str, timeout: float) -> None:
        """Wait for `event` (set by `on_line`); fail at once if the process exits."""
        deadline = time.monotonic() + timeout
        while not event.wait(0.1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {what}:\n" + self.tail())

    def tail(self, lines: int = 40) -> str:
        return f"--- {self.name} ---\n" + "\n".join(self.log[-lines:])

    def terminate(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()

    def stop(self) -> None:
        self.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class WebServer(_Process):
    """`gunicorn omniroute_admin.wsgi` with ONE worker process (so exactly one set of
    per-process caches) and a few threads, on a port of 127.0.0.1 the kernel picks."""

    def __init__(self, env: dict[str, str], name: str) -> None:
        self.base_url = ""
        self.listening = threading.Event()
        argv = [
            sys.executable,
            "-m",
            "gunicorn",
            "omniroute_admin.wsgi:application",
            "--bind",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--threads",
            "4",
            "--graceful-timeout",
            "5",
        ]
        super().__init__(argv, env, name)

    def on_line(self, line: str) -> None:
        if not self.listening.is_set() and "Listening at: " in line:
            self.base_url = line.split("Listening at: ", 1)[1].split()[0]
            self.listening.set()

    def wait_ready(self) -> None:
        """Wait until the server answers /healthz."""
        self.wait_for(self.listening, "the web server did not start", SERVER_READY_TIMEOUT)
        import httpx

        def is_healthy() -> bool:
            try:
                return self.request("GET", "/healthz").status_code == 200
            except httpx.TransportError:
                return False

        wait_until(is_healthy, timeout=SERVER_READY_TIMEOUT, interval=0.1)

    def request(self, method: str, path: str, token: str | None = None, body: Any = None) -> Any:
        """One HTTP request to this server (JSON body, optional bearer token); an
        `httpx.Response`."""
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, self.base_url + path, headers=headers, json=body, timeout=10.0)


class CeleryWorker(_Process):
    """`celery -A omniroute_admin worker` named `name`; `beat=True` embeds the beat (run
    exactly one such worker against a broker, as in production)."""

    def __init__(
        self, env: dict[str, str], tmp: Path, name: str, *, beat: bool, concurrency: int
    ) -> None:
        self.ready = threading.Event()
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "omniroute_admin",
            "worker",
            "--hostname",
            f"{name}@%h",
            "--loglevel",
            "INFO",
            "--concurrency",
            str(concurrency),
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        if beat:
            argv += ["--beat", "--schedule", str(tmp / f"beat-schedule-{name}")]
        super().__init__(argv, env, name)

    def on_line(self, line: str) -> None:
        if " ready." in line:
            self.ready.set()

    def wait_ready(self) -> None:
        self.wait_for(self.ready, "the worker did not start", WORKER_READY_TIMEOUT)

    def refreshes(self, connection_id: str, outcome: str) -> int:
        """How many refreshes of the connection this worker logged with this outcome
        ("polled", or the reason it did not poll)."""
        line = f"refresh {connection_id}: {outcome}"
        return sum(1 for entry in list(self.log) if entry.endswith(line))

    def tasks_succeeded(self, task_name: str) -> int:
        """How many runs of the task this worker logged as succeeded."""
        return sum(
            1
            for entry in list(self.log)
            if f"Task {task_name}[" in entry and " succeeded " in entry
        )


def stop_together(*processes: _Process) -> None:
    """Ask every process to stop at once, then wait for each (killing stragglers)."""
    for process in processes:
        process.terminate()
    for process in processes:
        process.stop()


def happens_within(predicate: Callable[[], Any], seconds: float, interval: float = 0.05) -> bool:
    """Whether `predicate` becomes true within `seconds`. For an event that must NOT
    happen (a second poll): a bounded observation window, which, unlike `wait_until`,
    does not fail when the window ends."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


# --- Fault-injection helpers (appended for tests/integration/test_faults_*.py) ----------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Answer:
    """One HTTP answer and how long it took, measured by the client."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes, seconds: float) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.seconds = seconds

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def __repr__(self) -> str:
        return f"<Answer {self.status} in {self.seconds:.3f} s: {self.body[:200]!r}>"


def http_call(
    base_url: str,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: Any = None,
    timeout: float = 10.0,
) -> Answer:
    """One request on a fresh connection (a client-side timeout bounds every wait)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    headers = {"Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    connection = http.client.HTTPConnection(
        parts.hostname or "127.0.0.1", parts.port, timeout=timeout
    )
    started = time.monotonic()
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        content = response.read()
    finally:
        connection.close()
    seconds = time.monotonic() - started
    return Answer(
        response.status, {k.lower(): v for k, v in response.getheaders()}, content, seconds
    )


class ApiServer:
    """The app served over real HTTP by gunicorn, as in production (one worker process,
    threads, debug off), on a port of 127.0.0.1 the kernel picks. Threads are plenty, so
    a test can put more requests in flight at once than the app's own limits allow."""

    def __init__(
        self, env: dict[str, str], *, threads: int = 32, ready_timeout: float = 30.0
    ) -> None:
        self.url = ""
        self.log: list[str] = []
        self.listening = threading.Event()
        server_env = dict(env)
        server_env.update(
            {
                "DJANGO_DEBUG": "false",
                "DJANGO_SECRET_KEY": "integration-" + "s" * 50,
                "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
                "DJANGO_SECURE_SSL_REDIRECT": "false",
                "PYTHONUNBUFFERED": "1",
            }
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "omniroute_admin.wsgi:application",
                "--bind",
                "127.0.0.1:0",
                "--workers",
                "1",
                "--threads",
                str(threads),
                "--graceful-timeout",
                "2",
            ],
            cwd=ROOT,
            env=server_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        try:
            wait_until(self._is_up, timeout=ready_timeout, interval=0.1)
        except AssertionError:
            self.stop()
            raise AssertionError(
                "the API server did not start:\n" + "\n".join(self.log[-40:])
            ) from None

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line.rstrip())
            if not self.listening.is_set() and "Listening at: " in line:
                self.url = line.split("Listening at: ", 1)[1].split()[0]
                self.listening.set()

    def _is_up(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError("the API server exited:\n" + "\n".join(self.log[-40:]))
        if not self.listening.is_set():
            return False
        try:
            return http_call(self.url, "GET", "/healthz", timeout=1).status == 200
        except OSError:
            return False

    def call(self, method: str, path: str, **kwargs: Any) -> Answer:
        return http_call(self.url, method, path, **kwargs)

    def stop(self) -> None:
        """A quick shutdown (SIGINT): requests stuck on a sick dependency are not waited
        for beyond gunicorn's graceful timeout."""
        import signal

        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def child_pids(pid: int) -> list[int]:
    """Direct children of a process, read from /proc."""
    children: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return children


def descendant_pids(pid: int) -> list[int]:
    """Every process below `pid` (children first, then theirs)."""
    found: list[int] = []
    frontier = [pid]
    while frontier:
        children = [child for parent in frontier for child in child_pids(parent)]
        found.extend(children)
        frontier = children
    return found


def is_gone(pid: int) -> bool:
    """The process has exited (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def pid_connected_to(port: int, among: list[int]) -> int | None:
    """Which of these processes holds an established TCP connection to 127.0.0.1:`port`
    (read from /proc/net/tcp and each process's file descriptors)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == "01":  # 01: ESTABLISHED
                inodes.add(fields[9])
    for pid in among:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = fd.readlink()
            except OSError:
                continue
            if str(target).startswith("socket:[") and str(target)[8:-1] in inodes:
                return pid
    return None


def log_count(log: list[str], needle: str, *, start: int = 0) -> int:
    """How many lines of a subprocess log, from line `start` on, contain `needle`."""
    return sum(needle in line for line in log[start:])


def database_url_via(port: int) -> str:
    """`database_url()` with its host and port replaced by 127.0.0.1:`port` (a proxy)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(database_url())
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{port}" if credentials else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def concurrent_calls(
    base_url: str, count: int, method: str, path: str, *, token: str | None = None
) -> list[Answer]:
    """`count` requests sent at the same instant on connections opened beforehand (so
    no request waits on the server's accept backlog), each timed from its own send."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    sockets = []
    for _ in range(count):
        connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=10
        )
        connection.connect()
        sockets.append(connection)
    answers: list[Answer | None] = [None] * count
    go = threading.Event()

    def send(index: int) -> None:
        connection = sockets[index]
        go.wait()
        started = time.monotonic()
        try:
            connection.request(method, path, headers=headers)
            response = connection.getresponse()
            body = response.read()
            answers[index] = Answer(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                body,
                time.monotonic() - started,
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join(timeout=15)
    missing = [i for i, answer in enumerate(answers) if answer is None]
    assert not missing, f"requests {missing} got no answer"
    return [answer for answer in answers if answer is not None]


def unacked_messages(broker_url: str, queue: str) -> dict[str, dict[str, Any]]:
    """The messages of `queue` that a Redis broker holds as delivered but not acknowledged
    (kombu parks them in its `unacked` hash until acked, or restored after the visibility
    timeout), by delivery tag: each with its task name and keyword arguments."""
    import base64

    import redis

    client = redis.Redis.from_url(broker_url)
    parked: dict[str, dict[str, Any]] = {}
    for tag, raw in client.hgetall("unacked").items():
        message, _exchange, routing_key = json.loads(raw)
        if routing_key != queue:
            continue
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        _args, kwargs, _embed = json.loads(body)
        parked[tag.decode()] = {
            "task": message["headers"]["task"],
            "eta": message["headers"].get("eta"),
            "kwargs": kwargs,
        }
    return parked


def drop_broker_queue(broker_url: str, queue: str) -> None:
    """Delete a test's own queue from a Redis broker, with its parked unacked messages."""
    import redis

    client = redis.Redis.from_url(broker_url)
    for tag in unacked_messages(broker_url, queue):
        client.hdel("unacked", tag)
        client.zrem("unacked_index", tag)
    keys = [*client.scan_iter(match=f"{queue}*"), f"_kombu.binding.{queue}"]
    client.delete(*keys)
