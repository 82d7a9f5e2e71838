"""Fixtures: a real Celery worker (with beat) on the configured broker, against the test
database, and a local fake usage endpoint whose answers a test scripts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

from tests.conftest import TEST_CREDENTIAL_KEY
from tests.integration.harness import ScriptedUpstream, Worker, database_url


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    yield server
    server.stop()


@pytest.fixture
def worker_env(
    upstream: ScriptedUpstream, transactional_db: None, tmp_path: Path
) -> dict[str, str]:
    """The environment a worker needs to share this test's database and broker."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        {
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "CELERY_FILESYSTEM_BROKER_DIR": str(settings.BROKER_DIR),
            "OMNIROUTE_CREDENTIAL_KEY": TEST_CREDENTIAL_KEY,
            "QUOTA_URL_CLAUDE": upstream.url("/api/oauth/usage"),
            "QUOTA_BEAT_SECONDS": "1",
            # Servers started without a beat must not report it down a few seconds in;
            # tests/integration/test_beat_heartbeat.py sets its own short limit.
            "BEAT_HEARTBEAT_MAX_AGE_SECONDS": "60",
            "QUOTA_RESET_GRACE_SECONDS": "0.5",
            "QUOTA_HTTP_TIMEOUT_SECONDS": "2",
            "DJANGO_DEBUG": "true",
        }
    )
    return env


@pytest.fixture
def worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[Worker]:
    """A running worker with beat; stopped (and its connections closed) after the test."""
    # The test's own connection must not hold a transaction the worker would wait on.
    connections.close_all()
    running = Worker(worker_env, tmp_path)
    yield running
    running.stop()
