"""The embedded broker under a burst: a worker (concurrency 2, as `make run`) and a beat on
the filesystem transport (omniroute_admin/broker.py), three processes publishing at once
while the worker drains and the beat ticks every 0.2 s. Zero worker deaths, every burst
task run exactly once, no tick run twice. kombu's own transport lost the worker to an
empty message file (a JSONDecodeError) 8 times in 10,000 messages at this poll."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.harness import ROOT, wait_until

pytestmark = pytest.mark.integration

PUBLISHERS = 3
PER_PUBLISHER = 100
APP = "tests.integration.soak_app"
PUBLISH = (
    "import sys; from tests.integration.soak_app import record; "
    "[record.delay('burst', f'{sys.argv[1]}-{i}') for i in range(int(sys.argv[2]))]"
)


class Process:
    """A subprocess whose output lines are kept (read on a thread)."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.log: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, *args],
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

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.reader.join(timeout=5)


def _lines(record: Path) -> list[tuple[str, str]]:
    if not record.exists():
        return []
    return [tuple(line.split(" ", 1)) for line in record.read_text().splitlines()]  # type: ignore[misc]


def test_a_burst_on_the_embedded_broker_runs_every_task_once_and_no_worker_dies(
    tmp_path: Path,
) -> None:
    import os

    record = tmp_path / "record"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update({"SOAK_BROKER_DIR": str(tmp_path / "broker"), "SOAK_RECORD": str(record)})
    (tmp_path / "broker" / "processed").mkdir(parents=True)
    common = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    worker = Process(
        ["-m", "celery", "-A", APP, "worker", "--concurrency", "2", "--loglevel", "INFO", *common],
        env,
    )
    beat = Process(
        ["-m", "celery", "-A", APP, "beat", "--loglevel", "INFO", "-s", str(tmp_path / "sched")],
        env,
    )
    try:
        wait_until(lambda: any(" ready." in line for line in worker.log), timeout=60)
        publishers = [
            subprocess.Popen(
                [sys.executable, "-c", PUBLISH, str(n), str(PER_PUBLISHER)], cwd=ROOT, env=env
            )
            for n in range(PUBLISHERS)
        ]
        assert [p.wait(timeout=120) for p in publishers] == [0] * PUBLISHERS
        expected = PUBLISHERS * PER_PUBLISHER

        wait_until(
            lambda: sum(kind == "burst" for kind, _ in _lines(record)) >= expected, timeout=240
        )
        wait_until(lambda: sum(kind == "tick" for kind, _ in _lines(record)) >= 10, timeout=60)
        alive = worker.process.poll() is None and beat.process.poll() is None
    finally:
        beat.stop()
        worker.stop()

    runs = Counter(key for kind, key in _lines(record) if kind == "burst")
    ticks = Counter(key for kind, key in _lines(record) if kind == "tick")
    assert alive
    assert set(runs) == {f"{n}-{i}" for n in range(PUBLISHERS) for i in range(PER_PUBLISHER)}
    assert set(runs.values()) == {1}
    assert max(ticks.values()) == 1
    deaths = [
        line
        for line in worker.log
        if "Unrecoverable error" in line or "WorkerLostError" in line or "Traceback" in line
    ]
    assert deaths == []
