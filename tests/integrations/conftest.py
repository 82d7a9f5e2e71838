"""The gateway client package (integrations/python-client) against the real server
(pytest-django's live_server). The package is imported from its source tree."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "integrations" / "python-client" / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from omniroute_client import OmniRouteClient  # noqa: E402

# The clients' report spools (one SQLite file per control plane and token): this run's own.
os.environ.setdefault("OMNIROUTE_SPOOL_DIR", tempfile.mkdtemp(prefix="omniroute-spool-"))


class Clock:
    """An injected wall clock (epoch seconds) that a test moves by hand."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def curated(transactional_db: None) -> None:
    """The curated claude/oauth entry (seeded by a migration, which an earlier
    transactional test's flush may have removed)."""
    from billing import services as billing_services
    from billing.models import BillingCatalogEntry

    if not BillingCatalogEntry.objects.filter(provider="claude", auth_type="oauth").exists():
        billing_services.create_catalog_entry(
            billing_services.CatalogInput(
                "claude", "oauth", "subscription", "hard-stop", "Plan windows refuse past the limit"
            ),
            actor="test",
        )


@pytest.fixture
def gateway_token(curated: None) -> str:
    from ladder.tokens import create_token

    return create_token("gateway", "gateway")[1]


@pytest.fixture
def operator_token(transactional_db: None) -> str:
    from ladder.tokens import create_token

    return create_token("operator", "operator")[1]


@pytest.fixture
def clock() -> Clock:
    import time

    return Clock(time.time())


@pytest.fixture
def client(live_server: object, gateway_token: str, clock: Clock) -> Iterator[OmniRouteClient]:
    # Without the change feed: these tests pin the path of a server that has none (or a
    # feed that is down), revalidation by `valid_until` and `revalidate_seconds`; the
    # feed's own path is in test_client_feed.py.
    made = OmniRouteClient(
        str(live_server),
        gateway_token,
        clock=clock,
        flush_interval=0.05,
        follow_changes=False,
        timeout=10.0,
    )
    yield made
    made.close()
