"""Connections balanced across the workers of one real gunicorn master
(omniroute_admin.workers): two keep-alive connections that both landed on one worker end
up on two, a balanced host closes none, and one worker alone never closes one."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from http.client import HTTPConnection

import pytest
from django.db import connections

from tests.integration.harness import (
    _Process,
    child_pids,
    pid_connected_to,
    server_env,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WORKER_CLASS = "omniroute_admin.workers.UvicornWorker"


class Server(_Process):
    """`gunicorn omniroute_admin.asgi` with this project's worker class."""

    def __init__(self, workers: int) -> None:
        self.port = 0
        self.listening = threading.Event()
        env = server_env()
        argv = [sys.executable, "-m", "gunicorn", "omniroute_admin.asgi:application"]
        argv += ["-k", WORKER_CLASS, "--bind", "127.0.0.1:0", "--workers", str(workers)]
        argv += ["--graceful-timeout", "2", "--log-level", "info"]
        super().__init__(argv, env, f"gunicorn x{workers}")
        self.wait_for(self.listening, "gunicorn did not start", 60)

    def on_line(self, line: str) -> None:
        if not self.listening.is_set() and "Listening at: " in line:
            self.port = int(line.rsplit(":", 1)[1].split()[0])
            self.listening.set()

    def workers(self, count: int) -> list[int]:
        """The worker pids, once `count` of them answer."""
        return wait_until(lambda: _exactly(child_pids(self.process.pid), count), timeout=60)


def _exactly(pids: list[int], count: int) -> list[int] | None:
    return pids if len(pids) == count else None


def healthz(connection: HTTPConnection) -> bool:
    """One GET /healthz on this keep-alive connection; whether the server closed it."""
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    response.read()
    assert response.status == 200
    return (response.getheader("Connection") or "").lower() == "close"


def client_port(connection: HTTPConnection) -> int:
    assert connection.sock is not None
    port: int = connection.sock.getsockname()[1]
    return port


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    connections.close_all()  # no transaction of this test holds up the server
    started = Server(request.param)
    try:
        yield started
    finally:
        started.stop()
        print(started.tail())


@pytest.mark.parametrize("server", [2], indirect=True)
def test_two_connections_on_one_worker_end_up_on_two(server: Server) -> None:
    first, second = server.workers(2)
    clients = [HTTPConnection("127.0.0.1", server.port, timeout=10) for _ in range(2)]
    # With the second worker stopped, the first accepts both connections.
    os.kill(second, signal.SIGSTOP)
    try:
        for client in clients:
            client.connect()
        wait_until(
            lambda: all(pid_connected_to(client_port(c), [first]) == first for c in clients),
            timeout=10,
        )
    finally:
        os.kill(second, signal.SIGCONT)
    closed = 0
    holders: list[int | None] = []
    for _ in range(200):
        for client in clients:
            closed += healthz(client)  # http.client reconnects on the next request
        holders = [pid_connected_to(client_port(c), [first, second]) for c in clients if c.sock]
        if sorted(h or 0 for h in holders) == sorted([first, second]):
            break
    assert sorted(h or 0 for h in holders) == sorted([first, second])
    assert closed >= 1
    # Balanced: nothing more is closed.
    for _ in range(20):
        for client in clients:
            assert healthz(client) is False
    for client in clients:
        client.close()


@pytest.mark.parametrize("server", [1], indirect=True)
def test_one_worker_never_closes_a_connection(server: Server) -> None:
    (only,) = server.workers(1)
    clients = [HTTPConnection("127.0.0.1", server.port, timeout=10) for _ in range(3)]
    ports = []
    for client in clients:
        client.connect()
        ports.append(client_port(client))
    for _ in range(20):
        for client in clients:
            assert healthz(client) is False
    assert [client_port(c) for c in clients] == ports
    assert [pid_connected_to(port, [only]) for port in ports] == [only, only, only]
    for client in clients:
        client.close()
