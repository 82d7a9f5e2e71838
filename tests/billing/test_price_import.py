"""Importing a model_prices_and_context_window.json file."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from billing.models import AuditEntry, ModelPrice
from billing.price_import import PriceFileError, parse_price_file

DATA = Path(__file__).parent / "data"


def _prices() -> list[tuple[str, str, Decimal, Decimal]]:
    return [
        (p.provider, p.model, p.input_usd_per_mtok, p.output_usd_per_mtok)
        for p in ModelPrice.objects.order_by("provider", "model")
    ]


@pytest.mark.django_db
def test_import_prices_loads_chat_models_only() -> None:
    out = StringIO()

    call_command("import_prices", str(DATA / "prices_small.json"), stdout=out)

    assert out.getvalue().strip() == "created 3, updated 0, unchanged 0, skipped 1"
    assert _prices() == [
        ("anthropic", "claude-sonnet-4-5", Decimal("3.000000"), Decimal("15.000000")),
        ("openai", "gpt-4o", Decimal("2.500000"), Decimal("10.000000")),
        ("openai", "gpt-4o-mini", Decimal("0.150000"), Decimal("0.600000")),
    ]


@pytest.mark.django_db
def test_import_prices_is_idempotent() -> None:
    call_command("import_prices", str(DATA / "prices_small.json"), stdout=StringIO())
    audits_after_first = AuditEntry.objects.count()
    out = StringIO()

    call_command("import_prices", str(DATA / "prices_small.json"), stdout=out)

    assert out.getvalue().strip() == "created 0, updated 0, unchanged 3, skipped 1"
    assert AuditEntry.objects.count() == audits_after_first == 3


@pytest.mark.django_db
def test_import_prices_maps_providers(tmp_path: Path) -> None:
    call_command(
        "import_prices",
        str(DATA / "prices_small.json"),
        "--map",
        "anthropic=claude",
        stdout=StringIO(),
    )

    assert ModelPrice.objects.filter(provider="claude", model="claude-sonnet-4-5").exists()


@pytest.mark.django_db
def test_import_prices_updates_a_changed_price_and_audits_it(tmp_path: Path) -> None:
    call_command("import_prices", str(DATA / "prices_small.json"), stdout=StringIO())
    data = json.loads((DATA / "prices_small.json").read_text())
    data["gpt-4o"]["input_cost_per_token"] = 2e-06
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(data))
    out = StringIO()

    call_command("import_prices", str(changed), stdout=out)

    assert out.getvalue().strip() == "created 0, updated 1, unchanged 2, skipped 1"
    audit = AuditEntry.objects.filter(action="update").get()
    assert (audit.before["input_usd_per_mtok"], audit.after["input_usd_per_mtok"]) == (
        "2.500000",
        "2.000000",
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{not json", "is not valid JSON", id="not-json"),
        pytest.param("[1, 2]", "must be a JSON object", id="not-an-object"),
        pytest.param(
            '{"a": {"mode": "chat", "litellm_provider": "x", "input_cost_per_token": "abc",'
            ' "output_cost_per_token": 0}}',
            "input_cost_per_token is not a number",
            id="cost-not-a-number",
        ),
        pytest.param(
            '{"a": {"mode": "chat", "litellm_provider": "x", "input_cost_per_token": -1,'
            ' "output_cost_per_token": 0}}',
            "must not be negative",
            id="negative-cost",
        ),
        pytest.param('{"a": 5}', "each entry must be a JSON object", id="entry-not-object"),
    ],
)
@pytest.mark.django_db
def test_import_prices_refuses_a_broken_file_without_partial_writes(
    tmp_path: Path, content: str, message: str
) -> None:
    call_command("import_prices", str(DATA / "prices_small.json"), stdout=StringIO())
    before = _prices()
    # A valid entry first, so a partial import would have something to write.
    broken = tmp_path / "broken.json"
    if content.startswith("{") and content.endswith("}") and '"a"' in content:
        content = (
            '{"new-model": {"mode": "chat", "litellm_provider": "x", '
            '"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06}, ' + content[1:]
        )
    broken.write_text(content)

    with pytest.raises(CommandError, match=message):
        call_command("import_prices", str(broken), stdout=StringIO())

    assert _prices() == before


def test_import_prices_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("import_prices", str(tmp_path / "nope.json"))


def test_parse_price_file_rejects_boolean_costs() -> None:
    data = {
        "m": {
            "mode": "chat",
            "litellm_provider": "x",
            "input_cost_per_token": True,
            "output_cost_per_token": 0,
        }
    }

    with pytest.raises(PriceFileError, match="must be a number, got bool"):
        parse_price_file(data)
