"""A minimal Celery app on the embedded broker (omniroute_admin/broker.py) for the soak
test: the project's broker settings, one task that appends what it ran to a file, and a
beat schedule of one tick. Configured from the environment the test sets."""

from __future__ import annotations

import os

from celery import Celery

import omniroute_admin.celery  # noqa: F401  (registers the embedded transport)

BROKER_DIR = os.environ.get("SOAK_BROKER_DIR", "var/soak-broker")
RECORD = os.environ.get("SOAK_RECORD", "var/soak-record")

# No Django fixup: this app needs no settings or database.
app = Celery("soak", broker="filesystem://", fixups=[])
app.conf.update(
    broker_transport_options={
        "data_folder_in": BROKER_DIR,
        "data_folder_out": BROKER_DIR,
        "processed_folder": os.path.join(BROKER_DIR, "processed"),
        "control_folder": os.path.join(BROKER_DIR, "control"),
        "polling_interval": 0.1,  # as omniroute_admin/settings.py
    },
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    task_default_queue="soak",
    beat_schedule={"tick": {"task": "soak.record", "schedule": 0.2, "args": ("tick",)}},
    worker_hijack_root_logger=False,
)


@app.task(name="soak.record", bind=True)
def record(self: object, kind: str, key: str | None = None) -> None:
    """Append one line per run: the kind and the key (a tick's is its task id)."""
    task_id = self.request.id  # type: ignore[attr-defined]
    line = f"{kind} {key or task_id}\n"
    # One small O_APPEND write: lines from the pool's processes never interleave.
    fd = os.open(RECORD, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
