"""Run a command and start it again when it dies: `make run`'s worker and beat.

honcho (the Procfile's runner) stops every process when one exits. That suits Ctrl-C,
but a worker that died on its own took the web server and the beat down with it. Under
this loop a dead worker or beat is logged and restarted (after RESTART_DELAY seconds,
doubled while it keeps dying within MIN_UPTIME seconds, at most MAX_DELAY); SIGTERM or
SIGINT stops the command and then this loop, which exits with the command's code.

    python -m omniroute_admin.supervise [--restart-delay SECONDS] -- COMMAND [ARG...]

Production runs each process under its own supervisor (systemd, Kubernetes:
docs/OPERATIONS.md); this is for `make run`.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from types import FrameType

RESTART_DELAY = 1.0
MIN_UPTIME = 10.0
MAX_DELAY = 30.0


def _log(message: str) -> None:
    print(f"supervise: {message}", file=sys.stderr, flush=True)


def supervise(command: list[str], restart_delay: float = RESTART_DELAY) -> int:
    """Run `command` until a stop signal; restart it whenever it exits by itself."""
    stop = threading.Event()
    child: subprocess.Popen[bytes] | None = None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    delay = 0.0
    name = command[0].rsplit("/", 1)[-1]
    while True:
        started = time.monotonic()
        child = subprocess.Popen(command)
        code = child.wait()
        if stop.is_set():
            return code if code >= 0 else 0
        uptime = time.monotonic() - started
        if uptime >= MIN_UPTIME:
            delay = restart_delay
        else:  # dying at once again: wait longer each time, up to MAX_DELAY
            delay = min(max(delay * 2, restart_delay), MAX_DELAY)
        _log(
            f"{name} (pid {child.pid}) exited with {code} after {uptime:.0f} s; "
            f"restarting in {delay:g} s"
        )
        if stop.wait(delay):  # a stop signal during the pause ends the loop
            return 0


def main(argv: list[str]) -> int:
    restart_delay = RESTART_DELAY
    if argv[:1] == ["--restart-delay"]:
        restart_delay = float(argv[1])
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        _log("usage: python -m omniroute_admin.supervise [--restart-delay S] -- COMMAND...")
        return 2
    return supervise(argv, restart_delay)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
