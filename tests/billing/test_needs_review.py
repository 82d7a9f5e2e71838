"""Free must be explicit: an imported zero price needs review and is tiered as unpriced
until an operator confirms it (a `free` override) or enters the price by hand."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from billing import services
from billing.models import AuditEntry, ChangeCounter, ModelPrice
from billing.tiers import Tier
from ladder.models import ApiToken
from tests.billing.factories import make_price, run_import_prices
from tests.ladder.factories import api, make_token

pytestmark = pytest.mark.django_db

ZERO = {
    "mode": "chat",
    "litellm_provider": "gigachat",
    "input_cost_per_token": 0.0,
    "output_cost_per_token": 0.0,
}
PAID = {
    "mode": "chat",
    "litellm_provider": "openai",
    "input_cost_per_token": 2.5e-06,
    "output_cost_per_token": 1e-05,
}


def _import(tmp_path: Path, data: dict[str, Any]) -> str:
    return run_import_prices(tmp_path, data)


def _state(provider: str, model: str) -> tuple[str, bool, str | None, Tier]:
    price = ModelPrice.objects.get(provider=provider, model=model)
    tier = services.load_price_book().tier_of(provider, model)
    return price.source, price.needs_review, price.tier_override, tier


def _config_counter() -> int:
    return ChangeCounter.objects.get(name=ChangeCounter.CONFIG).value


def _by_hand(provider: str, model: str, input_usd: str, output_usd: str) -> ModelPrice:
    return make_price(provider, model, input_usd=input_usd, output_usd=output_usd, actor="olga")


def test_an_imported_zero_price_needs_review_and_is_tiered_as_unpriced(tmp_path: Path) -> None:
    output = _import(tmp_path, {"GigaChat-2-Max": ZERO, "gpt-4o": PAID})

    assert output == "created 2, updated 0, unchanged 0, skipped 0, invalid 0, need review 1"
    assert _state("gigachat", "GigaChat-2-Max") == ("import", True, None, Tier.PREMIUM)
    assert _state("openai", "gpt-4o") == ("import", False, None, Tier.PREMIUM)
    # Spend is priced as unpriced too: $5 in / $15 out per million tokens.
    book = services.load_price_book()
    assert book.cost_usd("gigachat", "GigaChat-2-Max", 1_000_000, 1_000_000) == Decimal(20)


def test_an_imported_zero_does_not_borrow_its_providers_free_wildcard_price(
    tmp_path: Path,
) -> None:
    _by_hand("ollama", "*", "0", "0")  # local models: free by hand

    _import(tmp_path, {"ollama/gpt-oss:120b-cloud": {**ZERO, "litellm_provider": "ollama"}})

    assert _state("ollama", "gpt-oss:120b-cloud") == ("import", True, None, Tier.PREMIUM)
    assert services.load_price_book().tier_of("ollama", "llama3") is Tier.FREE


def test_a_zero_entered_by_hand_is_free() -> None:
    _by_hand("google", "gemma", "0", "0")

    assert _state("google", "gemma") == ("manual", False, None, Tier.FREE)


def test_re_entering_a_price_by_hand_clears_its_review(tmp_path: Path) -> None:
    _import(tmp_path, {"GigaChat-2-Max": ZERO})
    counter = _config_counter()

    _by_hand("gigachat", "GigaChat-2-Max", "0", "0")

    assert _state("gigachat", "GigaChat-2-Max") == ("manual", False, None, Tier.FREE)
    assert _config_counter() == counter + 1
    audit = AuditEntry.objects.filter(target_type="price", action="update").get()
    assert (audit.before["needs_review"], audit.after["needs_review"]) == (True, False)
    assert (audit.before["source"], audit.after["source"]) == ("import", "manual")


def test_confirming_free_sets_a_free_override_audits_and_moves_the_config_counter(
    tmp_path: Path,
) -> None:
    _import(tmp_path, {"GigaChat-2-Max": ZERO})
    price = ModelPrice.objects.get()
    counter = _config_counter()

    services.confirm_free(price.pk, actor="olga")

    assert _state("gigachat", "GigaChat-2-Max") == ("import", False, "free", Tier.FREE)
    assert _config_counter() == counter + 1
    audit = AuditEntry.objects.filter(action="update").get()
    assert (audit.actor, audit.target_id) == ("olga", str(price.pk))
    assert (audit.before["needs_review"], audit.before["tier_override"]) == (True, None)
    assert (audit.after["needs_review"], audit.after["tier_override"]) == (False, "free")


def test_confirming_a_deleted_price_changes_nothing() -> None:
    counter = _config_counter()

    with pytest.raises(ModelPrice.DoesNotExist):
        services.confirm_free(999_999, actor="olga")

    assert (_config_counter(), AuditEntry.objects.count()) == (counter, 0)


def test_reimporting_a_confirmed_zero_keeps_it_confirmed(tmp_path: Path) -> None:
    _import(tmp_path, {"GigaChat-2-Max": ZERO})
    services.confirm_free(ModelPrice.objects.get().pk, actor="olga")

    output = _import(tmp_path, {"GigaChat-2-Max": ZERO})

    assert output == "created 0, updated 0, unchanged 1, skipped 0, invalid 0, need review 0"
    assert _state("gigachat", "GigaChat-2-Max") == ("import", False, "free", Tier.FREE)


def test_reimporting_an_unconfirmed_zero_still_counts_it_as_needing_review(
    tmp_path: Path,
) -> None:
    _import(tmp_path, {"GigaChat-2-Max": ZERO})

    output = _import(tmp_path, {"GigaChat-2-Max": ZERO})

    assert output == "created 0, updated 0, unchanged 1, skipped 0, invalid 0, need review 1"


def test_a_hand_entered_zero_survives_an_import_of_the_same_zero(tmp_path: Path) -> None:
    _by_hand("gigachat", "GigaChat-2-Max", "0", "0")

    output = _import(tmp_path, {"GigaChat-2-Max": ZERO})

    assert output == "created 0, updated 0, unchanged 1, skipped 0, invalid 0, need review 0"
    assert _state("gigachat", "GigaChat-2-Max") == ("manual", False, None, Tier.FREE)


def test_an_import_that_zeroes_a_known_price_flags_it_for_review(tmp_path: Path) -> None:
    _by_hand("openai", "gpt-4o", "2.5", "10")

    output = _import(tmp_path, {"gpt-4o": {**PAID, **{k: ZERO[k] for k in ZERO if "cost" in k}}})

    assert output == "created 0, updated 1, unchanged 0, skipped 0, invalid 0, need review 1"
    assert _state("openai", "gpt-4o") == ("import", True, None, Tier.PREMIUM)


def test_an_import_that_prices_a_reviewed_row_clears_its_review(tmp_path: Path) -> None:
    _import(tmp_path, {"GigaChat-2-Max": ZERO})

    _import(tmp_path, {"GigaChat-2-Max": {**ZERO, "input_cost_per_token": 5e-07}})

    assert _state("gigachat", "GigaChat-2-Max") == ("import", False, None, Tier.CHEAP)


def test_an_imported_zero_with_a_free_override_already_is_not_flagged(tmp_path: Path) -> None:
    services.upsert_price(
        services.PriceInput("gigachat", "GigaChat-2-Max", Decimal(1), Decimal(1), "free"),
        actor="olga",
    )

    output = _import(tmp_path, {"GigaChat-2-Max": ZERO})

    assert output.endswith("need review 0")
    assert _state("gigachat", "GigaChat-2-Max") == ("import", False, "free", Tier.FREE)


# --- the API shows the flag and never takes it as input ------------------------------------


def test_the_api_shows_source_and_needs_review(tmp_path: Path) -> None:
    _import(tmp_path, {"GigaChat-2-Max": ZERO})
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)

    [row] = api("get", "/api/v1/prices", gateway).json()

    assert (row["source"], row["needs_review"], row["tier"]) == ("import", True, "premium")


@pytest.mark.parametrize("field", ["source", "needs_review"])
def test_source_and_needs_review_are_read_only_in_the_api(field: str) -> None:
    operator = make_token("ops", ApiToken.Scope.OPERATOR)
    body = {
        "provider": "gigachat",
        "model": "GigaChat-2-Max",
        "input_usd_per_mtok": 0,
        "output_usd_per_mtok": 0,
        field: "import" if field == "source" else True,
    }

    response = api("post", "/api/v1/prices", operator, body)

    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "payload", field]]
    assert not ModelPrice.objects.exists()


def test_posting_a_zero_price_through_the_api_is_a_hand_entered_free(tmp_path: Path) -> None:
    _import(tmp_path, {"GigaChat-2-Max": ZERO})
    operator = make_token("ops", ApiToken.Scope.OPERATOR)
    body = {
        "provider": "gigachat",
        "model": "GigaChat-2-Max",
        "input_usd_per_mtok": 0,
        "output_usd_per_mtok": 0,
    }

    response = api("post", "/api/v1/prices", operator, body)

    assert response.status_code == 200
    assert {k: response.json()[k] for k in ("source", "needs_review", "tier")} == {
        "source": "manual",
        "needs_review": False,
        "tier": "free",
    }
