"""Suite-wide fixtures."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

TEST_CREDENTIAL_KEY = "t1:" + Fernet.generate_key().decode()


@pytest.fixture(autouse=True)
def _credential_key(settings: pytest.FixtureRequest) -> None:
    """Every test has a credential key unless it removes it on purpose."""
    settings.OMNIROUTE_CREDENTIAL_KEY = TEST_CREDENTIAL_KEY  # type: ignore[attr-defined]
