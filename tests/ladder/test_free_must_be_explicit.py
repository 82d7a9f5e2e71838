"""Free must be explicit, through the decisions and spend: an imported zero price never
puts a metered model on the free rung (tried before cheap, with no budget) until an
operator confirms it; the cached snapshot the decisions use sees the flag."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from billing import services as billing_services
from billing.models import ModelPrice
from ladder import services
from ladder.models import ApiToken
from tests.ladder.factories import NOW, api, make_candidate, make_connection, make_token

pytestmark = pytest.mark.django_db

PLACEHOLDER_ZEROS = {
    "ollama/gpt-oss:120b-cloud": {
        "mode": "chat",
        "litellm_provider": "ollama",
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
    }
}


@pytest.fixture
def imported_zero(tmp_path: Path) -> None:
    make_connection("ollama-cloud", provider="ollama", auth_type="apikey")
    make_candidate("ollama", "gpt-oss:120b-cloud", connection_id="ollama-cloud")
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PLACEHOLDER_ZEROS))
    call_command("import_prices", str(path), stdout=StringIO())


def _thrifty_rungs(token: str) -> list[tuple[str, str]]:
    body = api("get", "/api/v1/pools/auto/thrifty", token).json()
    return [(c["model"], c["rung"]) for c in body["candidates"]]


def test_an_imported_zero_price_never_puts_a_model_on_the_free_rung(imported_zero: None) -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)

    assert _thrifty_rungs(gateway) == [("gpt-oss:120b-cloud", "premium")]


def test_confirming_free_moves_the_model_to_the_free_rung_in_warm_processes(
    imported_zero: None,
) -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    assert _thrifty_rungs(gateway) == [("gpt-oss:120b-cloud", "premium")]  # snapshot cached

    billing_services.confirm_free(ModelPrice.objects.get().pk, actor="olga")

    assert _thrifty_rungs(gateway) == [("gpt-oss:120b-cloud", "free")]


def test_spend_on_an_imported_zero_is_priced_as_unpriced_on_the_premium_rung(
    imported_zero: None,
) -> None:
    entry, _ = services.record_spend(
        services.SpendInput(
            "r1", "ollama-cloud", "ollama", "gpt-oss:120b-cloud", None, 1_000_000, 1_000_000
        ),
        now=NOW,
    )

    assert (entry.cost_usd, entry.rung) == (Decimal("20.00000000"), "premium")
