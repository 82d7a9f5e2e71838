"""Importing a model_prices_and_context_window.json file."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from billing import services
from billing.models import AuditEntry, ModelPrice
from billing.price_import import ParsedPriceFile, PriceFileError, parse_price_file
from billing.tiers import PriceRow
from ladder.models import ApiToken
from tests.billing.factories import run_import_prices
from tests.ladder.factories import api, make_token

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

    assert out.getvalue().strip() == (
        "created 3, updated 0, unchanged 0, skipped 1, invalid 0, need review 0"
    )
    # LiteLLM's `anthropic` is stored as the catalog's `claude` (a seeded provider alias).
    assert _prices() == [
        ("claude", "claude-sonnet-4-5", Decimal("3.000000"), Decimal("15.000000")),
        ("openai", "gpt-4o", Decimal("2.500000"), Decimal("10.000000")),
        ("openai", "gpt-4o-mini", Decimal("0.150000"), Decimal("0.600000")),
    ]


@pytest.mark.django_db
def test_import_prices_is_idempotent() -> None:
    call_command("import_prices", str(DATA / "prices_small.json"), stdout=StringIO())
    audits_after_first = AuditEntry.objects.count()
    out = StringIO()

    call_command("import_prices", str(DATA / "prices_small.json"), stdout=out)

    assert out.getvalue().strip() == (
        "created 0, updated 0, unchanged 3, skipped 1, invalid 0, need review 0"
    )
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

    assert out.getvalue().strip() == (
        "created 0, updated 1, unchanged 2, skipped 1, invalid 0, need review 0"
    )
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
    ],
)
@pytest.mark.django_db
def test_import_prices_refuses_an_unreadable_file_without_partial_writes(
    tmp_path: Path, content: str, message: str
) -> None:
    call_command("import_prices", str(DATA / "prices_small.json"), stdout=StringIO())
    before = _prices()
    broken = tmp_path / "broken.json"
    broken.write_text(content)

    with pytest.raises(CommandError, match=message):
        call_command("import_prices", str(broken), stdout=StringIO())

    assert _prices() == before


def test_import_prices_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("import_prices", str(tmp_path / "nope.json"))


# --- hostile price files: malformed rows are skipped and counted, never stored -----------

GOOD_ROW = {
    "mode": "chat",
    "litellm_provider": "openai",
    "input_cost_per_token": 1e-06,
    "output_cost_per_token": 2e-06,
}


def _row(**fields: Any) -> dict[str, Any]:
    return {**GOOD_ROW, **fields}


def _import(tmp_path: Path, data: Any, *options: str) -> str:
    return run_import_prices(tmp_path, data, *options)


@pytest.mark.django_db
def test_a_cost_of_1000_usd_per_token_is_skipped_and_the_price_table_stays_readable(
    tmp_path: Path, client: Any
) -> None:
    # 1,000 USD per token is 1e9 USD per million: beyond the column (14 digits, 6 after
    # the point). SQLite would store it and then fail every read of the table.
    data = {"good": GOOD_ROW, "absurd": _row(input_cost_per_token=1000)}

    output = _import(tmp_path, data)

    assert output == "created 1, updated 0, unchanged 0, skipped 0, invalid 1, need review 0"
    assert _prices() == [("openai", "good", Decimal("1.000000"), Decimal("2.000000"))]
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    assert api("get", "/api/v1/prices", gateway).status_code == 200
    # Every pool answer reads the price table (the decision snapshot): still answered.
    assert api("get", "/api/v1/pools/auto/thrifty", gateway).status_code == 200


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(_row(litellm_provider="p" * 65), id="provider-of-65-characters"),
        pytest.param(_row(litellm_provider="open\x00ai"), id="nul-in-provider"),
        pytest.param(_row(litellm_provider="open\ud800ai"), id="lone-surrogate-in-provider"),
        pytest.param(_row(litellm_provider="open\r\nai"), id="crlf-in-provider"),
        pytest.param(_row(litellm_provider=7), id="provider-not-a-string"),
        pytest.param(_row(litellm_provider="  "), id="blank-provider"),
        pytest.param(_row(input_cost_per_token="1e999999"), id="cost-1e999999-as-text"),
        pytest.param(_row(input_cost_per_token="-1e999999"), id="cost-minus-1e999999"),
        pytest.param(_row(output_cost_per_token=1000), id="cost-1000-usd-per-token"),
        pytest.param(_row(input_cost_per_token="99.9999999999999"), id="cost-rounding-past-column"),
        pytest.param(_row(input_cost_per_token="abc"), id="cost-not-a-number"),
        pytest.param(_row(input_cost_per_token="NaN"), id="cost-nan-as-text"),
        pytest.param(_row(input_cost_per_token="sNaN"), id="cost-signalling-nan"),
        pytest.param(_row(input_cost_per_token="Infinity"), id="cost-infinite-as-text"),
        pytest.param(_row(input_cost_per_token=-1), id="negative-cost"),
        pytest.param(_row(input_cost_per_token=True), id="boolean-cost"),
        pytest.param(_row(input_cost_per_token=None), id="null-cost"),
        pytest.param(_row(input_cost_per_token=[[[1e-06]]]), id="nested-cost"),
        pytest.param(_row(input_cost_per_token={"usd": 1}), id="object-cost"),
        pytest.param(5, id="entry-not-an-object"),
        pytest.param([GOOD_ROW], id="entry-a-list"),
    ],
)
@pytest.mark.django_db
def test_a_malformed_row_is_skipped_and_counted_and_the_rest_imported(
    tmp_path: Path, entry: Any
) -> None:
    data = {"good": GOOD_ROW, "bad": entry}

    output = _import(tmp_path, data)

    assert output == "created 1, updated 0, unchanged 0, skipped 0, invalid 1, need review 0"
    assert _prices() == [("openai", "good", Decimal("1.000000"), Decimal("2.000000"))]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("m" * 201, id="model-of-201-characters"),
        pytest.param("gpt\x00x", id="nul-in-model"),
        pytest.param("gpt\ud800x", id="lone-surrogate-in-model"),
        pytest.param("gpt\nx", id="newline-in-model"),
        pytest.param("openai/", id="empty-model-after-the-prefix"),
    ],
)
@pytest.mark.django_db
def test_a_row_with_a_malformed_model_name_is_skipped(tmp_path: Path, name: str) -> None:
    output = _import(tmp_path, {"good": GOOD_ROW, name: GOOD_ROW})

    assert output == "created 1, updated 0, unchanged 0, skipped 0, invalid 1, need review 0"
    assert [row[:2] for row in _prices()] == [("openai", "good")]


@pytest.mark.django_db
def test_a_lone_surrogate_escaped_in_the_json_is_skipped_not_a_crash(tmp_path: Path) -> None:
    # The escape decodes to a lone surrogate, which no database encodes.
    text = json.dumps({"good": GOOD_ROW})[:-1] + ', "bad\\udc80": ' + json.dumps(GOOD_ROW) + "}"

    output = _import(tmp_path, text)

    assert output == "created 1, updated 0, unchanged 0, skipped 0, invalid 1, need review 0"


@pytest.mark.django_db
def test_a_cost_of_1e999999_as_a_json_number_is_skipped_not_the_whole_file(
    tmp_path: Path,
) -> None:
    # Python reads the JSON number 1e999999 as an infinite float.
    bad = '{"mode": "chat", "litellm_provider": "openai", "input_cost_per_token": 1e999999, '
    bad += '"output_cost_per_token": 0}'
    text = '{"good": ' + json.dumps(GOOD_ROW) + ', "bad": ' + bad + "}"

    output = _import(tmp_path, text)

    assert output == "created 1, updated 0, unchanged 0, skipped 0, invalid 1, need review 0"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("[" * 50_000 + "]" * 50_000, "nested too deeply", id="array-50000-deep"),
        pytest.param(
            '{"good": '
            + json.dumps(GOOD_ROW)[:-1]
            + ', "x": '
            + '{"a": ' * 50_000
            + "1"
            + "}" * 50_000
            + "}}",
            "nested too deeply",
            id="row-nested-50000-deep",
        ),
        pytest.param('{"a": ' + "9" * 5000 + "}", "a number is out of range", id="huge-integer"),
        pytest.param(b"\xff\xfe{}", "not UTF-8", id="not-utf-8"),
        pytest.param(b'{"a\xed\xa0\x80": 1}', "not UTF-8", id="encoded-surrogate"),
    ],
)
@pytest.mark.django_db
def test_an_unreadable_price_file_changes_nothing(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    call_command("import_prices", str(DATA / "prices_small.json"), stdout=StringIO())
    before = _prices()
    path = tmp_path / "broken.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)

    with pytest.raises(CommandError, match=message):
        call_command("import_prices", str(path), stdout=StringIO())

    assert _prices() == before


@pytest.mark.parametrize(
    "pair",
    [
        pytest.param("openai=" + "p" * 300, id="target-of-300-characters"),
        pytest.param("openai=p\x00x", id="nul-in-target"),
        pytest.param("openai=p\nx", id="newline-in-target"),
        pytest.param("openai=", id="empty-target"),
        pytest.param("openai", id="no-equals-sign"),
    ],
)
@pytest.mark.django_db
def test_a_malformed_provider_map_is_refused_and_changes_nothing(pair: str) -> None:
    with pytest.raises(CommandError, match="--map"):
        call_command(
            "import_prices", str(DATA / "prices_small.json"), "--map", pair, stdout=StringIO()
        )

    assert _prices() == []


def test_the_parser_is_pure_and_counts_what_it_skips() -> None:
    limits = services.price_limits()
    data = {
        "good": GOOD_ROW,
        "embedding": {**GOOD_ROW, "mode": "embedding"},
        "unpriced": {"mode": "chat", "litellm_provider": "openai"},
        "bad": _row(input_cost_per_token=True),
    }

    parsed = parse_price_file(data, limits=limits)

    assert (len(parsed.rows), parsed.skipped, parsed.invalid) == (1, 2, 1)


def test_the_parser_refuses_a_file_that_is_not_an_object() -> None:
    with pytest.raises(PriceFileError, match="must be a JSON object"):
        parse_price_file([GOOD_ROW], limits=services.price_limits())


@pytest.mark.django_db
def test_rows_handed_to_the_import_service_are_checked_again_against_the_columns() -> None:
    # Whoever built the rows, a value beyond a column never reaches the table.
    parsed = ParsedPriceFile(
        rows=(
            PriceRow("openai", "good", Decimal("1"), Decimal("2")),
            PriceRow("openai", "huge", Decimal("1e9"), Decimal("2")),
            PriceRow("openai", "rounds-up", Decimal("99999999.9999999"), Decimal("2")),
            PriceRow("p" * 65, "long-provider", Decimal("1"), Decimal("2")),
            PriceRow("openai", "nul\x00", Decimal("1"), Decimal("2")),
        ),
        skipped=0,
    )

    counts = services.import_prices(parsed, actor="test")

    assert (counts.created, counts.invalid) == (1, 4)
    assert _prices() == [("openai", "good", Decimal("1.000000"), Decimal("2.000000"))]
