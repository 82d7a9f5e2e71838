"""The catalog and price pages: inline create, edit and delete with validation,
conflicts and audit history; the price list with tiers, and the price file upload."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from billing import services
from billing.models import AuditEntry, BillingCatalogEntry, ModelPrice
from ladder.models import LadderSettings
from omniroute_admin import dashboard
from tests.billing.factories import PRICE_FILE, import_rows
from tests.ladder.factories import NOW
from tests.pages import Element, parse
from tests.worlds import htmx_headers, seed_demo_world, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def demo() -> None:
    seed_demo_world(NOW, history=False)


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


def _entry(provider: str, auth_type: str | None = None) -> BillingCatalogEntry:
    return BillingCatalogEntry.objects.get(provider=provider, auth_type=auth_type)


def _catalog_row(page: Element, entry: BillingCatalogEntry) -> list[str]:
    return [cell.text for cell in page.by_id(f"entry-{entry.pk}").by_tag("td")]


def _entry_data(**fields: Any) -> dict[str, Any]:
    data = {
        "provider": "mistral",
        "auth_type": "apikey",
        "billing": "metered",
        "overage": "meters-to-paid",
        "reason": "La Plateforme keys bill per token.",
    }
    data.update(fields)
    return data


def _field_errors(page: Element) -> list[str]:
    return [error.text for error in page.by_class("field-error")]


# --- catalog ------------------------------------------------------------------------------


def test_catalog_lists_entries_with_the_connections_each_decides(
    demo: None, operator: Client
) -> None:
    page = parse(operator.get("/catalog/").content)

    entry = _entry("claude", "oauth")
    row = _catalog_row(page, entry)

    assert row[:5] == [str(entry.pk), "claude", "oauth", "subscription", "hard-stop"]
    assert row[5].startswith("Pro/Max plan windows refuse past the limit until reset History (0)")
    assert row[6] == "claude-max-1, claude-max-2"


def test_catalog_notes_that_uncurated_providers_count_as_metered(
    demo: None, operator: Client
) -> None:
    page = parse(operator.get("/catalog/").content)

    assert "Uncurated is not free: a provider with no entry counts as metered" in page.text
    assert page.by_class("note-warn")[0].text == (
        "1 connection matches no entry and counts as metered: anthropic-key."
    )


def test_catalog_create_adds_an_audited_entry(operator: Client) -> None:
    response = operator.post(
        "/catalog/create/", _entry_data(), headers=htmx_headers("catalog-table")
    )

    entry = _entry("mistral", "apikey")
    assert response.status_code == 200
    assert (entry.billing, entry.overage, entry.updated_by, entry.version) == (
        "metered",
        "meters-to-paid",
        "olga",
        1,
    )
    audit = AuditEntry.objects.get(target_type="catalog", target_id=str(entry.pk))
    assert (audit.action, audit.actor, audit.before) == ("create", "olga", None)
    assert parse(response.content).by_class("notice")[0].text == "Created mistral/apikey."


def test_catalog_create_without_javascript_redirects_to_the_entry(operator: Client) -> None:
    response = operator.post("/catalog/create/", _entry_data(auth_type=""))

    entry = _entry("mistral")
    assert (response.status_code, response["Location"]) == (302, f"/catalog/#entry-{entry.pk}")


def test_catalog_create_shows_field_messages_and_creates_nothing(operator: Client) -> None:
    before = BillingCatalogEntry.objects.count()

    response = operator.post(
        "/catalog/create/",
        _entry_data(reason="", billing="free"),
        headers=htmx_headers("catalog-table"),
    )

    assert response.status_code == 422
    assert _field_errors(parse(response.content)) == [
        "Select a valid choice. free is not one of the available choices.",
        "This field is required.",
    ]
    assert BillingCatalogEntry.objects.count() == before


def test_catalog_refuses_an_entry_for_the_no_auth_path(operator: Client) -> None:
    response = operator.post("/catalog/create/", _entry_data(auth_type="none"))

    assert response.status_code == 422
    assert _field_errors(parse(response.content)) == [
        "The no-auth path ('none') is keyless by rule and never consults the catalog."
    ]


def test_catalog_duplicate_is_a_plain_conflict(operator: Client) -> None:
    before = list(BillingCatalogEntry.objects.values())

    response = operator.post(
        "/catalog/create/",
        _entry_data(provider="claude", auth_type="oauth"),
        headers=htmx_headers("catalog-table"),
    )

    assert response.status_code == 409
    assert parse(response.content).by_class("notice")[0].text == (
        "An entry for provider 'claude' with auth type 'oauth' exists already."
    )
    assert list(BillingCatalogEntry.objects.values()) == before


def test_catalog_edit_form_carries_the_version_it_was_loaded_at(
    demo: None, operator: Client
) -> None:
    entry = _entry("openai")

    page = parse(operator.get(f"/catalog/?edit={entry.pk}").content)

    form = page.by_id(f"entry-{entry.pk}").by_tag("form")[0]
    fields = {e.attrs["name"]: e.attrs.get("value") for e in form.by_tag("input")}
    assert fields["version"] == "1"
    assert fields["provider"] == "openai"
    assert form.attrs["action"] == f"/catalog/{entry.pk}/update/"


def test_catalog_update_saves_over_the_loaded_version_and_audits(
    demo: None, operator: Client
) -> None:
    entry = _entry("openai")
    data = _entry_data(
        provider="openai",
        auth_type="",
        billing="subscription",
        overage="hard-stop",
        reason="Pretend plan.",
        version="1",
    )

    response = operator.post(
        f"/catalog/{entry.pk}/update/", data, headers=htmx_headers("catalog-table")
    )

    entry.refresh_from_db()
    assert response.status_code == 200
    assert (entry.billing, entry.overage, entry.version, entry.updated_by) == (
        "subscription",
        "hard-stop",
        2,
        "olga",
    )
    history = parse(response.content).by_id(f"entry-{entry.pk}").by_class("history")[0]
    assert history.by_tag("li")[0].text.endswith(
        "olga changed: Billing: metered → subscription; Overage: meters-to-paid → hard-stop; "
        "Reason: API keys bill per token. → Pretend plan."
    )


def test_catalog_update_over_a_newer_version_is_refused(demo: None, operator: Client) -> None:
    entry = _entry("openai")
    BillingCatalogEntry.objects.filter(pk=entry.pk).update(version=3, updated_by="mallory")
    before = list(BillingCatalogEntry.objects.values())

    response = operator.post(
        f"/catalog/{entry.pk}/update/",
        _entry_data(provider="openai", auth_type="", version="1"),
        headers=htmx_headers("catalog-table"),
    )

    assert response.status_code == 409
    assert parse(response.content).by_class("notice")[0].text == (
        "This entry was changed by mallory since you loaded it (version 3, yours 1); "
        "reload and retry."
    )
    assert list(BillingCatalogEntry.objects.values()) == before


def test_catalog_update_into_a_duplicate_is_a_conflict(demo: None, operator: Client) -> None:
    entry = _entry("openai")

    response = operator.post(
        f"/catalog/{entry.pk}/update/",
        _entry_data(provider="groq", auth_type="", version="1"),
        headers=htmx_headers("catalog-table"),
    )

    assert response.status_code == 409
    assert "A provider-wide entry for 'groq' exists already." in parse(response.content).text
    assert _entry("openai").version == 1


def test_catalog_update_of_a_deleted_entry_says_so(operator: Client) -> None:
    response = operator.post("/catalog/999999/update/", _entry_data(version="1"))

    assert response.status_code == 404
    assert parse(response.content).by_class("notice")[0].text == (
        "That entry was deleted meanwhile; nothing was saved."
    )


def test_catalog_delete_asks_first_then_deletes_and_audits(demo: None, operator: Client) -> None:
    entry = _entry("groq")

    confirm = parse(operator.get(f"/catalog/?delete={entry.pk}").content)
    assert "Delete the entry for groq/*? The 1 connection it decides fall back" in confirm.text
    assert BillingCatalogEntry.objects.filter(pk=entry.pk).exists()

    response = operator.post(f"/catalog/{entry.pk}/delete/", headers=htmx_headers("catalog-table"))

    assert response.status_code == 200
    assert not BillingCatalogEntry.objects.filter(pk=entry.pk).exists()
    audit = AuditEntry.objects.get(target_type="catalog", target_id=str(entry.pk), action="delete")
    assert (audit.actor, audit.before["provider"], audit.after) == ("olga", "groq", None)
    deleted = parse(response.content).by_class("deleted")[0].text
    assert "deleted entry" in deleted
    assert "Provider: groq; Auth type: " in deleted  # labels, never auth_type
    assert "auth_type" not in deleted


def test_a_catalog_edit_changes_the_verdict_and_the_pool(demo: None, operator: Client) -> None:
    entry = _entry("openai")
    operator.post(
        f"/catalog/{entry.pk}/update/",
        _entry_data(
            provider="openai",
            auth_type="",
            billing="subscription",
            overage="hard-stop",
            version="1",
        ),
    )

    connections = parse(operator.get("/connections/").content)
    pools = parse(operator.get("/pools/?auto_id=auto/thrifty").content)

    row = connections.find_all(lambda e: e.attrs.get("data-connection") == "openai-key")[0]
    entry = _entry("openai")
    assert row.by_tag("td")[1].text == (f"subscription overage hard-stop entry {entry.pk} openai/*")
    first_rung = pools.by_class("pool-rung")[0]
    assert first_rung.by_class("rung-name")[0].text == "subscription"
    assert [li.text for li in first_rung.by_tag("li")] == [
        "claude/claude-sonnet-4-5 via claude-max-1",
        "cursor/cursor-fast via cursor-pro",
        "openai/gpt-4o-mini via openai-key",
        "openai/gpt-4o via openai-key",
    ]


# --- prices ---------------------------------------------------------------------------------


def _price_rows(page: Element) -> list[list[str]]:
    rows = page.by_class("prices")[0].by_tag("tbody")[0].by_tag("tr")
    return [[cell.text for cell in row.by_tag("td")][:5] for row in rows]


def test_prices_list_shows_each_computed_tier(demo: None, operator: Client) -> None:
    page = parse(operator.get("/prices/").content)

    assert _price_rows(page) == [
        ["claude", "claude-sonnet-4-5", "3.00", "15.00", "premium"],
        ["groq", "* every other model", "0.00", "0.00", "free"],
        ["ollama", "* every other model", "0.00", "0.00", "free"],
        ["openai", "gpt-4o", "2.50", "10.00", "premium"],
        ["openai", "gpt-4o-mini", "0.15", "0.60", "cheap"],
    ]


def test_price_tier_follows_the_cheap_boundary(demo: None, operator: Client) -> None:
    LadderSettings.objects.filter(pk=1).update(cheap_max_input_usd_per_mtok="3")

    tiers = [row[4] for row in _price_rows(parse(operator.get("/prices/").content))]

    assert tiers == ["cheap", "free", "free", "cheap", "cheap"]


def test_price_search_filters_by_provider_or_model(demo: None, operator: Client) -> None:
    rows = _price_rows(parse(operator.get("/prices/?q=mini").content))

    assert rows == [["openai", "gpt-4o-mini", "0.15", "0.60", "cheap"]]


def test_price_edit_saves_an_override_and_audits(demo: None, operator: Client) -> None:
    price = ModelPrice.objects.get(provider="openai", model="gpt-4o")
    data = {
        "provider": "openai",
        "model": "gpt-4o",
        "input_usd_per_mtok": "2.5",
        "output_usd_per_mtok": "10",
        "tier_override": "cheap",
    }

    response = operator.post(
        f"/prices/save/?edit={price.pk}", data, headers=htmx_headers("price-table")
    )

    price.refresh_from_db()
    assert (response.status_code, price.tier_override, price.updated_by) == (200, "cheap", "olga")
    assert (
        AuditEntry.objects.filter(
            target_type="price", target_id=str(price.pk), action="update"
        ).count()
        == 1
    )


def test_price_with_a_negative_number_is_refused(demo: None, operator: Client) -> None:
    before = list(ModelPrice.objects.values())
    data = {
        "provider": "openai",
        "model": "gpt-4o",
        "input_usd_per_mtok": "-1",
        "output_usd_per_mtok": "10",
        "tier_override": "",
    }

    response = operator.post("/prices/save/", data, headers=htmx_headers("price-table"))

    assert response.status_code == 422
    assert _field_errors(parse(response.content)) == [
        "Ensure this value is greater than or equal to 0."
    ]
    assert list(ModelPrice.objects.values()) == before


def test_price_delete_asks_first_then_deletes(demo: None, operator: Client) -> None:
    price = ModelPrice.objects.get(provider="openai", model="gpt-4o")
    others = list(ModelPrice.objects.exclude(pk=price.pk).order_by("pk").values())
    config, state = services.change_counters()
    audits = AuditEntry.objects.count()

    confirm = parse(operator.get(f"/prices/?delete={price.pk}").content)
    assert "Delete the price of openai/gpt-4o?" in confirm.text
    assert ModelPrice.objects.filter(pk=price.pk).exists()
    assert (services.change_counters(), AuditEntry.objects.count()) == ((config, state), audits)

    response = operator.post(f"/prices/{price.pk}/delete/", headers=htmx_headers("price-table"))

    assert response.status_code == 200
    assert parse(response.content).by_class("notice-success")[0].text == (
        "Price deleted: the model is priced by its provider's * row, or assumed premium."
    )
    assert not ModelPrice.objects.filter(pk=price.pk).exists()
    assert list(ModelPrice.objects.order_by("pk").values()) == others
    assert services.change_counters() == (config + 1, state)
    assert AuditEntry.objects.count() == audits + 1
    audit = AuditEntry.objects.get(target_type="price", target_id=str(price.pk), action="delete")
    assert (audit.actor, audit.after) == ("olga", None)
    assert audit.before == {
        "provider": "openai",
        "model": "gpt-4o",
        "input_usd_per_mtok": "2.500000",
        "output_usd_per_mtok": "10.000000",
        "tier_override": None,
        "source": "manual",
        "needs_review": False,
    }


def test_price_file_upload_imports_and_reports_counts(operator: Client) -> None:
    upload = SimpleUploadedFile("model_prices.json", PRICE_FILE.read_bytes())

    response = operator.post(
        "/prices/import/",
        {"file": upload, "provider_map": "anthropic=claude"},
        headers=htmx_headers("price-import"),
    )

    assert response.status_code == 200
    assert response["HX-Trigger"] == "prices-changed"
    assert parse(response.content).by_class("notice-success")[0].text == (
        "Imported: 3 created, 0 updated, 0 unchanged, 1 skipped (not chat models, or unpriced), "
        "0 invalid (malformed or out of range, not stored); 0 need review (imported zeros, "
        "counted as unpriced until confirmed)."
    )
    assert sorted(ModelPrice.objects.values_list("provider", "model")) == [
        ("claude", "claude-sonnet-4-5"),
        ("openai", "gpt-4o"),
        ("openai", "gpt-4o-mini"),
    ]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (
            b"{not json",
            "prices.json: The file is not valid JSON (line 1, column 2). Nothing was imported.",
        ),
        (
            b"\xff\xfe{}",
            "prices.json: The file is not UTF-8 text. Nothing was imported.",
        ),
        (
            b"[" * 50_000 + b"]" * 50_000,
            "prices.json: The file is nested too deeply to be a price file. Nothing was imported.",
        ),
        (
            b"[1, 2]",
            "prices.json: The price file must be a JSON object keyed by model name. "
            "Nothing was imported.",
        ),
    ],
    ids=["not-json", "not-utf-8", "nested-50000-deep", "not-an-object"],
)
def test_a_broken_price_file_shows_the_error_and_changes_nothing(
    demo: None, operator: Client, content: bytes, error: str
) -> None:
    before = list(ModelPrice.objects.values())

    response = operator.post(
        "/prices/import/",
        {"file": SimpleUploadedFile("prices.json", content)},
        headers=htmx_headers("price-import"),
    )

    assert response.status_code == 422
    assert parse(response.content).by_class("notice-error")[0].text == error
    assert list(ModelPrice.objects.values()) == before


def test_price_import_form_reports_upload_progress(operator: Client) -> None:
    form = parse(operator.get("/prices/").content).by_id("price-import").by_tag("form")[0]

    assert "data-upload-progress" in form.attrs
    assert form.attrs["hx-encoding"] == "multipart/form-data"
    assert len(form.by_tag("progress")) == 1


# --- prices awaiting review, hostile search strings, scale ---------------------------------


def _import_rows(*rows: tuple[str, str, str]) -> None:
    import_rows(*rows)


def test_the_prices_page_lists_the_rows_that_need_review(demo: None, operator: Client) -> None:
    _import_rows(("gigachat", "GigaChat-2-Max", "0"), ("cohere", "command-a-plus", "0"))

    page = parse(operator.get("/prices/").content)
    review = parse(operator.get("/prices/?review=1").content)

    assert page.by_id("price-review-filter").text.startswith("Needs review: 2")
    assert _price_rows(review) == [
        ["cohere", "command-a-plus", "0.00", "0.00", "premium needs review"],
        ["gigachat", "GigaChat-2-Max", "0.00", "0.00", "premium needs review"],
    ]


def test_confirm_free_on_the_prices_page_is_audited_and_moves_the_model_to_free(
    demo: None, operator: Client
) -> None:
    from billing.models import ChangeCounter

    _import_rows(("gigachat", "GigaChat-2-Max", "0"))
    price = ModelPrice.objects.get(provider="gigachat")
    counter = ChangeCounter.objects.get(name="config").value
    page = parse(operator.get("/prices/?review=1").content)
    [button] = page.by_id(f"price-{price.pk}").by_tag("button")
    assert button.text == "Confirm free"

    response = operator.post(
        f"/prices/{price.pk}/confirm-free/?review=1", headers=htmx_headers("price-table")
    )

    assert response.status_code == 200
    price.refresh_from_db()
    assert (price.needs_review, price.tier_override) == (False, "free")
    assert ChangeCounter.objects.get(name="config").value == counter + 1
    audit = AuditEntry.objects.filter(target_type="price", target_id=str(price.pk)).first()
    assert audit is not None
    assert (audit.actor, audit.after["tier_override"]) == ("olga", "free")
    # The review list, re-rendered, no longer holds it.
    assert _price_rows(parse(response.content)) == [["No price needs review."]]


def test_a_viewer_cannot_confirm_free(demo: None, client: Client) -> None:
    _import_rows(("gigachat", "GigaChat-2-Max", "0"))
    price = ModelPrice.objects.get(provider="gigachat")
    viewer = signed_in(client, "victor", "viewer")

    response = viewer.post(f"/prices/{price.pk}/confirm-free/")

    assert response.status_code == 403
    price.refresh_from_db()
    assert (price.needs_review, price.tier_override) == (True, None)


def test_a_nul_in_the_price_search_is_dropped_not_a_crash(demo: None, client: Client) -> None:
    viewer = signed_in(client, "victor", "viewer")

    response = viewer.get("/prices/?q=%00")
    narrowed = viewer.get("/prices/?q=mi%00ni")

    assert response.status_code == narrowed.status_code == 200
    assert len(_price_rows(parse(response.content))) == 5  # an empty search: every price
    assert _price_rows(parse(narrowed.content)) == [
        ["openai", "gpt-4o-mini", "0.15", "0.60", "cheap"]
    ]


def test_the_prices_page_takes_the_same_queries_at_1_and_2000_rows(operator: Client) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(url: str) -> int:
        operator.get(url)
        with CaptureQueriesContext(connection) as captured:
            assert operator.get(url).status_code == 200
        return len(captured)

    _import_rows(("bulk", "m-0000", "1"))
    at_one = queries("/prices/")
    _import_rows(*(("bulk", f"m-{n:04d}", "1") for n in range(2000)))

    assert queries("/prices/") == at_one
    assert queries("/prices/?q=m-&review=0") == at_one


def test_the_prices_page_lists_every_row_once_by_its_next_links(operator: Client) -> None:
    _import_rows(*(("bulk", f"m-{n:04d}", "1") for n in range(250)))
    seen: list[str] = []
    url: str | None = "/prices/"
    while url is not None:
        page = parse(operator.get(url).content)
        seen += [row[1] for row in _price_rows(page)]
        pager = page.by_class("pager")
        nexts = [a for a in pager[0].by_tag("a") if a.text == "Next \u2192"] if pager else []
        url = str(nexts[0].attrs["href"]) if nexts else None

    assert seen == [f"m-{n:04d}" for n in range(250)]


def test_previous_goes_back_one_page(operator: Client) -> None:
    _import_rows(*(("bulk", f"m-{n:04d}", "1") for n in range(250)))
    first = parse(operator.get("/prices/").content)
    [next_link] = [a for a in first.by_class("pager")[0].by_tag("a") if a.text == "Next \u2192"]
    second = parse(operator.get(str(next_link.attrs["href"])).content)
    [back] = [a for a in second.by_class("pager")[0].by_tag("a") if a.text == "\u2190 Previous"]

    again = parse(operator.get(str(back.attrs["href"])).content)

    assert _price_rows(second)[0][1] == "m-0100"
    assert _price_rows(again) == _price_rows(first)


def test_a_stale_page_link_shows_the_first_page(operator: Client) -> None:
    _import_rows(("bulk", "m-0000", "1"))

    response = operator.get("/prices/?after=not-a-cursor%00")

    assert response.status_code == 200
    assert [row[1] for row in _price_rows(parse(response.content))] == ["m-0000"]


def test_a_price_upload_with_absurd_rows_imports_the_rest_and_counts_them(
    operator: Client,
) -> None:
    def row(provider: str = "openai", cost: object = 1e-06) -> dict[str, object]:
        return {
            "mode": "chat",
            "litellm_provider": provider,
            "input_cost_per_token": cost,
            "output_cost_per_token": 0 if cost == 0 else 1e-06,
        }

    # json.dumps escapes the NUL and the lone surrogate, as a hostile file would.
    content = json.dumps(
        {
            "good": row(),
            "absurd": row(cost=1000),
            "huge": row(cost="1e999999"),
            "long": row("p" * 65),
            "nul": row("open\x00ai"),
            "surrogate\udc80": row(),
            "zero": row(cost=0),
        }
    )

    response = operator.post(
        "/prices/import/",
        {"file": SimpleUploadedFile("prices.json", content.encode())},
        headers=htmx_headers("price-import"),
    )

    assert response.status_code == 200
    notice = parse(response.content).by_class("notice-success")[0].text
    assert notice.startswith("Imported: 2 created, 0 updated, 0 unchanged, 0 skipped")
    assert "5 invalid (malformed or out of range, not stored); 1 need review" in notice
    assert sorted(ModelPrice.objects.values_list("model", "needs_review")) == [
        ("good", False),
        ("zero", True),
    ]


@pytest.mark.parametrize(
    "provider_map",
    ["openai=" + "p" * 300, "openai=a\x00b", "openai="],
    ids=["target-of-300-characters", "nul-in-target", "empty-target"],
)
def test_a_malformed_provider_map_in_the_upload_is_refused_and_changes_nothing(
    demo: None, operator: Client, provider_map: str
) -> None:
    before = list(ModelPrice.objects.values())

    response = operator.post(
        "/prices/import/",
        {
            "file": SimpleUploadedFile("p.json", PRICE_FILE.read_bytes()),
            "provider_map": provider_map,
        },
        headers=htmx_headers("price-import"),
    )

    assert response.status_code == 422
    assert _field_errors(parse(response.content))
    assert list(ModelPrice.objects.values()) == before


def test_prices_read_one_way_on_every_page_to_the_cent_a_fraction_kept(operator: Client) -> None:
    from decimal import Decimal

    from ladder import services as ladder_services
    from tests.billing.factories import make_price

    make_price("openai", "nano", input_usd="0.075", output_usd="0.3")
    make_price("openai", "big", input_usd="3", output_usd="15.5")
    row = ladder_services.get_settings_row()
    values = {name: getattr(row, name) for name in ladder_services.SETTINGS_FIELDS}
    ladder_services.update_settings(
        {**values, "cheap_budget_usd": Decimal("20"), "cheap_max_input_usd_per_mtok": Decimal(1)},
        actor="olga",
    )

    prices = parse(operator.get("/prices/").content)
    settings = parse(signed_in(Client(), "vera", "viewer").get("/settings/").content)

    assert _price_rows(prices) == [
        ["openai", "big", "3.00", "15.50", "premium"],
        ["openai", "nano", "0.075", "0.30", "cheap"],
    ]
    assert "at or below 1.00 cheap" in prices.by_class("lede")[0].text
    current = {
        dt.text: dd.text
        for dt, dd in zip(settings.by_tag("dt"), settings.by_tag("dd"), strict=False)
    }
    assert current["Cheap budget"] == "20.00 USD"
    assert current["Cheap / premium boundary"] == "1.00 USD per M input tokens"
