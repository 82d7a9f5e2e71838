"""`make run`'s restart loop (omniroute_admin/supervise.py): a worker or beat that dies by
itself is started again; a stop signal stops the command and the loop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.integration.harness import wait_until
from tests.processes import ROOT

# Dies with 3 on its first run; on its second writes "serving" and waits to be stopped.
CHILD = """
import pathlib, signal, sys, time
runs = pathlib.Path(sys.argv[1])
runs.write_text(runs.read_text() + "run\\n" if runs.exists() else "run\\n")
if runs.read_text().count("run") == 1:
    sys.exit(3)
def stop(*args):
    runs.write_text(runs.read_text() + "stopped\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
runs.write_text(runs.read_text() + "serving\\n")
signal.pause()
"""


def test_a_command_that_dies_is_restarted_and_a_stop_signal_stops_both(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    loop = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "omniroute_admin.supervise",
            "--restart-delay",
            "0.05",
            "--",
            sys.executable,
            "-c",
            CHILD,
            str(runs),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: runs.exists() and "serving" in runs.read_text(), timeout=60)
        loop.send_signal(signal.SIGTERM)
        code = loop.wait(timeout=30)
    finally:
        if loop.poll() is None:
            loop.kill()
    assert loop.stderr is not None
    logged = loop.stderr.read()

    assert code == 0
    assert runs.read_text().splitlines() == ["run", "run", "serving", "stopped"]
    assert "exited with 3" in logged
    assert "restarting in 0.05 s" in logged


def test_a_stop_during_the_pause_ends_the_loop_without_a_restart(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    loop = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "omniroute_admin.supervise",
            "--restart-delay",
            "20",
            "--",
            sys.executable,
            "-c",
            "import sys, pathlib; pathlib.Path(sys.argv[1]).touch(); sys.exit(1)",
            str(runs),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: loop.stderr is not None and runs.exists(), timeout=60)
        assert loop.stderr is not None
        assert "restarting in 20 s" in loop.stderr.readline()
        os.kill(loop.pid, signal.SIGINT)
        code = loop.wait(timeout=30)
    finally:
        if loop.poll() is None:
            loop.kill()

    assert code == 0


def test_without_a_command_it_says_how_to_use_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "omniroute_admin.supervise"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 2
    assert "usage: python -m omniroute_admin.supervise" in result.stderr
