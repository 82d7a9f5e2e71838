"""A threaded TCP forwarder for fault injection: put it between a component and the
real PostgreSQL or Redis, then switch its mode instead of stopping the real service
(the rest of the suite keeps using it).

Modes:
- `forward`: bytes flow both ways (the default; also what ends `hang`).
- `refuse`: every open connection is closed and every new one is reset at once, as
  when the service has stopped.
- `hang`: connections are accepted and held open but nothing is forwarded either way,
  as when the service (or the network) stops answering. Returning to `forward` lets
  the held bytes through, as when the service wakes up.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from enum import StrEnum

POLL_SECONDS = 0.05
CONNECT_TIMEOUT_SECONDS = 2.0


class Mode(StrEnum):
    FORWARD = "forward"
    REFUSE = "refuse"
    HANG = "hang"


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset (linger 0), as a refused or crashed peer does."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Pair:
    """One proxied connection: the client's socket and ours to the target."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.lock = threading.Lock()
        self.closed = False
        self.pumps_running = 2

    def shut(self) -> None:
        """Wake both pumps with end-of-file; the last pump out closes the sockets."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def pump_finished(self) -> None:
        self.shut()
        with self.lock:
            self.pumps_running -= 1
            last = self.pumps_running == 0
        if last:
            self.client.close()
            self.upstream.close()


class TcpProxy:
    """Listens on 127.0.0.1:<random port> and forwards to `target_host:target_port`."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.host, self.port = self._listener.getsockname()
        self._lock = threading.Lock()
        self._mode = Mode.FORWARD
        self._flowing = threading.Event()
        self._flowing.set()
        self._stopping = threading.Event()
        self._pairs: set[_Pair] = set()
        self._threads: list[threading.Thread] = []
        self.accepted = 0
        self._acceptor = threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True)
        self._acceptor.start()

    @property
    def mode(self) -> Mode:
        return self._mode

    def forward(self) -> None:
        """Let bytes flow again (held connections resume where they stopped)."""
        with self._lock:
            self._mode = Mode.FORWARD
        self._flowing.set()

    def refuse(self) -> None:
        """Close every open connection and reset every new one."""
        with self._lock:
            self._mode = Mode.REFUSE
            pairs = list(self._pairs)
        self._flowing.set()  # let paused pumps see the end-of-file and exit
        for pair in pairs:
            pair.shut()

    def hang(self) -> None:
        """Hold every connection open, old and new, and forward nothing."""
        with self._lock:
            self._mode = Mode.HANG
        self._flowing.clear()

    def stop(self) -> None:
        """Close the listener and every connection; join the threads."""
        self._stopping.set()
        self._flowing.set()
        self._acceptor.join(timeout=5)
        self._listener.close()
        with self._lock:
            pairs = list(self._pairs)
            threads = list(self._threads)
        for pair in pairs:
            pair.shut()
        for thread in threads:
            thread.join(timeout=5)

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            ready, _, _ = select.select([self._listener], [], [], POLL_SECONDS)
            if not ready:
                continue
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            self.accepted += 1
            if self._mode is Mode.REFUSE:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=CONNECT_TIMEOUT_SECONDS)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, upstream)
            with self._lock:
                if self._mode is Mode.REFUSE:  # refused while we were connecting
                    _reset(client)
                    upstream.close()
                    continue
                self._pairs.add(pair)
                threads = [
                    threading.Thread(target=self._pump, args=(pair, src, dst), daemon=True)
                    for src, dst in ((client, upstream), (upstream, client))
                ]
                self._threads = [t for t in self._threads if t.is_alive()] + threads
            for thread in threads:
                thread.start()

    def _pump(self, pair: _Pair, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not pair.closed:
                if not self._flowing.wait(POLL_SECONDS):
                    continue  # hung: leave the bytes where they are
                try:
                    readable, _, _ = select.select([src], [], [], POLL_SECONDS)
                except (OSError, ValueError):
                    return
                # Checked again after the wait: a hang that began meanwhile holds these bytes.
                if not readable or not self._flowing.is_set():
                    continue
                data = src.recv(65536)
                if not data:
                    return
                dst.sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                self._pairs.discard(pair)
            pair.pump_finished()
