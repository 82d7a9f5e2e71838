"""The embedded (filesystem) broker's worker looks at its folder often enough that a beat
tick's messages are all taken within their one-period expiry (omniroute_admin/settings.py)."""

from __future__ import annotations

import os
from pathlib import Path
from subprocess import CompletedProcess

from tests.processes import DJANGO_SETUP, run_python

READ_POLL = (
    DJANGO_SETUP
    + "; from omniroute_admin.celery import app"
    + "; print(app.connection().transport.polling_interval)"
)


def _start(code: str, tmp_path: Path, **extra: str) -> CompletedProcess[str]:
    """`code` in a fresh process on the filesystem broker (in `tmp_path`), with `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    env.update({"CELERY_FILESYSTEM_BROKER_DIR": str(tmp_path / "broker"), **extra})
    return run_python(["-c", code], env)


def _polling_interval(tmp_path: Path, **extra: str) -> str:
    result = _start(READ_POLL, tmp_path, **extra)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_filesystem_worker_looks_at_its_folder_ten_times_a_second(tmp_path: Path) -> None:
    # kombu's own default (1 s) let the third message of a tick wait a whole beat period
    # behind the two a worker of concurrency 2 may hold, so it expired unrun.
    assert _polling_interval(tmp_path) == "0.1"


def test_the_filesystem_poll_is_a_setting(tmp_path: Path) -> None:
    assert _polling_interval(tmp_path, CELERY_FILESYSTEM_BROKER_POLL_SECONDS="0.25") == "0.25"


def test_a_filesystem_poll_of_zero_stops_start_up(tmp_path: Path) -> None:
    result = _start(DJANGO_SETUP, tmp_path, CELERY_FILESYSTEM_BROKER_POLL_SECONDS="0")

    assert result.returncode != 0
    assert "CELERY_FILESYSTEM_BROKER_POLL_SECONDS must be more than 0." in result.stderr
