"""The embedded (filesystem) broker: `filesystem://` is the transport that writes each
message whole before it appears (omniroute_admin/broker.py), and its worker looks at its
folder often enough that a beat tick's messages are all taken within their one-period
expiry (omniroute_admin/settings.py). The soak: tests/integration/test_embedded_broker_soak.py."""

from __future__ import annotations

import os
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
from kombu.exceptions import ChannelError

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


READ_TRANSPORT = (
    DJANGO_SETUP
    + "; from omniroute_admin.celery import app"
    + "; t = type(app.connection().transport); print(t.__module__ + '.' + t.__name__)"
)


def test_the_embedded_broker_is_the_transport_that_writes_messages_whole(
    tmp_path: Path,
) -> None:
    result = _start(READ_TRANSPORT, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "omniroute_admin.broker.Transport"


def _channel(folder: Path) -> Any:
    from kombu import Connection

    from omniroute_admin import broker

    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    connection = Connection(transport=broker.Transport, transport_options=options)
    return connection.default_channel


def test_a_message_appears_in_its_queue_only_when_written_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # kombu's own transport opened the final file first: a reader polling then could
    # take it still empty and stop the worker on JSONDecodeError. Here the write is
    # interrupted before its rename: the queue's folder has no message at all.
    from omniroute_admin import broker

    channel = _channel(tmp_path)

    def interrupted(source: str, target: str) -> None:
        assert [p.name for p in tmp_path.iterdir() if p.suffix == ".msg"] == []
        assert Path(source).read_bytes().startswith(b'{"body"')  # complete beside it
        raise OSError("interrupted")

    monkeypatch.setattr(broker.os, "replace", interrupted)
    with pytest.raises(ChannelError):
        channel._put("omniroute", {"body": "x" * 10_000})

    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".msg"] == []


def test_a_written_message_is_read_back_whole(tmp_path: Path) -> None:
    channel = _channel(tmp_path)

    channel._put("omniroute", {"body": "one"})
    channel._put("omniroute", {"body": "two"})

    assert [channel._get("omniroute")["body"] for _ in range(2)] == ["one", "two"]


def test_an_exchange_table_still_being_created_reads_as_no_queue(tmp_path: Path) -> None:
    channel = _channel(tmp_path)
    control = Path(channel.control_folder)
    control.mkdir(parents=True, exist_ok=True)
    (control / "celery.pidbox.exchange").write_bytes(b"")  # opened, not yet written

    assert channel.get_table("celery.pidbox") == []
