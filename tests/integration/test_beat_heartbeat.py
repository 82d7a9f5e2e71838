"""A dead beat is noticed, with a real worker and its embedded beat on the broker.

The failure: SIGKILL the beat child of `celery worker --beat`; the worker lives on and
nothing sends a due scan again. The heartbeat the beat sends every period stops with
it, so /readyz goes 503 naming `beat` once the heartbeat is older than the limit (a
short one here), while the worker itself is still running. The beat process stamps each
heartbeat it sent, so the beat's silence is told from a worker's."""

from __future__ import annotations

import os
import re
import signal
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client, override_settings
from django.utils import timezone

from ladder import beat
from tests.integration.harness import (
    Worker,
    child_pids,
    drop_broker_queue,
    is_gone,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

BEAT_SECONDS = 1
LIMIT_SECONDS = 3


@pytest.fixture(autouse=True)
def _needs_proc() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("finding the beat child reads /proc (Linux)")


@pytest.fixture
def queue(transactional_db: None) -> Iterator[str]:
    """A queue of this test's own, deleted afterwards with whatever is left in it."""
    name = f"beat-{uuid.uuid4().hex[:12]}"
    yield name
    if settings.CELERY_BROKER_URL.startswith("redis://"):
        drop_broker_queue(settings.CELERY_BROKER_URL, name)


@pytest.fixture
def worker(worker_env: dict[str, str], queue: str, tmp_path: Path) -> Iterator[Worker]:
    env = dict(
        worker_env,
        CELERY_TASK_DEFAULT_QUEUE=queue,
        QUOTA_BEAT_SECONDS=str(BEAT_SECONDS),
        BEAT_HEARTBEAT_MAX_AGE_SECONDS=str(LIMIT_SECONDS),
    )
    connections.close_all()  # the test's own connection holds nothing the worker waits on
    running = Worker(env, tmp_path)
    yield running
    running.stop()
    print("worker log:", *running.log[-40:], sep="\n")  # shown on failure


def _beat_child(worker: Worker) -> int:
    """The embedded beat: the worker's one child that does not map the pool's shared
    memory (prefork pool processes all do; the beat process is started apart)."""
    found = []
    for pid in child_pids(worker.process.pid):
        try:
            targets = [str(fd.readlink()) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        if not any("/pymp-" in target for target in targets):
            found.append(pid)
    assert len(found) == 1, f"expected one beat child, found {found}"
    return found[0]


def _readyz() -> Any:
    with override_settings(
        QUOTA_BEAT_SECONDS=BEAT_SECONDS, BEAT_HEARTBEAT_MAX_AGE_SECONDS=LIMIT_SECONDS
    ):
        response = Client().get("/readyz")
    connections.close_all()  # never hold the SQLite file between polls
    return response


def test_readyz_names_the_beat_once_the_embedded_beat_is_killed(
    worker: Worker, tmp_path: Path
) -> None:
    first = wait_until(beat.last_heartbeat, timeout=30, interval=0.2)
    # The beat process stamped it as sent too (ladder/tasks.py's after_task_publish).
    sent_at = wait_until(lambda: beat.heartbeat_times()[1], timeout=30, interval=0.2)
    connections.close_all()
    assert _readyz().status_code == 200
    beat_pid = _beat_child(worker)

    os.kill(beat_pid, signal.SIGKILL)
    wait_until(lambda: is_gone(beat_pid), timeout=10)
    killed_at = timezone.now()
    down = wait_until(
        lambda: (answer := _readyz()).status_code == 503 and answer, timeout=30, interval=0.2
    )

    assert worker.process.poll() is None  # the worker lives on: only the heartbeat tells
    body = down.json()
    assert body["status"] == "unavailable"
    assert list(body["down"]) == ["beat"]
    match = re.fullmatch(r"last heartbeat (\d+) s ago \(limit 3 s\)", body["down"]["beat"])
    assert match is not None, body
    assert int(match.group(1)) >= LIMIT_SECONDS
    # The heartbeats stopped with the process killed (one sent just before may still run).
    last = beat.last_heartbeat()
    assert last is not None
    assert first <= last <= killed_at + timedelta(seconds=BEAT_SECONDS + 1)
    last_sent_at = beat.heartbeat_times()[1]
    assert last_sent_at is not None
    assert sent_at <= last_sent_at <= killed_at  # no stamp after the beat died
