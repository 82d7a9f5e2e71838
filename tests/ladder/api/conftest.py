"""The tokens the API tests call with."""

from __future__ import annotations

import pytest

from ladder.models import ApiToken
from tests.ladder.factories import make_token


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


@pytest.fixture
def operator() -> str:
    return make_token("ops", ApiToken.Scope.OPERATOR)
