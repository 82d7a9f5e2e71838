"""The catalog form: the safest defaults (metered, overage unknown), the known
providers and auth types offered (free text still allowed), a "did you mean" for a
near miss of a known name, and each entry's number with its anchor."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from billing import services
from billing.models import AuditEntry, BillingCatalogEntry
from billing.names import did_you_mean
from omniroute_admin import dashboard
from tests.ladder.factories import NOW
from tests.pages import Element, parse
from tests.worlds import htmx_headers, seed_demo_world, signed_in

pytestmark = pytest.mark.django_db

NEAR_KIMI = (
    "Did you mean “kimi”? “kimmi” is not a known provider (an entry for it would match no "
    "connection). Tick “Keep as typed” to save it anyway."
)
NEAR_OAUTH = (
    "Did you mean “oauth”? “oath” is not a known auth type (an entry for it would match no "
    "connection). Tick “Keep as typed” to save it anyway."
)


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def operator(client: Client) -> Client:
    seed_demo_world(NOW, history=False)
    services.create_catalog_entry(
        services.CatalogInput("kimi", "oauth", "subscription", "hard-stop", "Plan quota."),
        actor="olga",
    )
    return signed_in(client, "olga", "operator")


def _typo(**fields: Any) -> dict[str, Any]:
    return {
        "provider": "kimmi",
        "auth_type": "oath",
        "billing": "metered",
        "overage": "unknown",
        "reason": "Typed in a hurry.",
        **fields,
    }


def _form(page: Element) -> Element:
    return page.find_all(lambda e: e.tag == "form" and e.attrs.get("action") == "/catalog/create/")[
        0
    ]


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("kimmi", "kimi"),
        ("oath", "oauth"),
        (" Oath ", "oauth"),
        ("kimi", None),  # known exactly
        ("Kimi", None),  # the same name once normalised (every write lower-cases it)
        ("OAuth", None),
        ("mistral", None),  # close to nothing
        ("", None),
    ],
)
def test_did_you_mean_compares_normalised_names_and_is_quiet_for_known_ones(
    typed: str, meant: str | None
) -> None:
    assert did_you_mean(typed, ["kimi", "oauth", "apikey", "claude"]) == meant


def test_the_new_entry_form_defaults_to_metered_with_overage_unknown(operator: Client) -> None:
    form = _form(parse(operator.get("/catalog/").content))

    selected = {
        select.attrs["name"]: [
            o.attrs["value"] for o in select.by_tag("option") if "selected" in o.attrs
        ]
        for select in form.by_tag("select")
    }
    assert selected == {"billing": ["metered"], "overage": ["unknown"]}


def test_known_providers_and_auth_types_are_offered_as_free_text_choices(
    operator: Client,
) -> None:
    page = parse(operator.get("/catalog/").content)

    inputs = {i.attrs["name"]: i.attrs.get("list") for i in _form(page).by_tag("input")}
    assert (inputs["provider"], inputs["auth_type"]) == ("curated-providers", "curated-auth-types")
    options = {
        name: [o.attrs["value"] for o in page.by_id(name).by_tag("option")]
        for name in ("curated-providers", "curated-auth-types")
    }
    assert options == {
        "curated-providers": [
            "antigravity",
            "claude",
            "codex",
            "copilot",
            "cursor",
            "devin-desktop",
            "groq",
            "kimi",
            "openai",
        ],
        "curated-auth-types": ["apikey", "oauth"],
    }


@pytest.mark.parametrize("headers", [{}, htmx_headers("catalog-table")], ids=["page", "fragment"])
def test_a_near_miss_is_held_back_with_did_you_mean(
    operator: Client, headers: dict[str, str]
) -> None:
    count = BillingCatalogEntry.objects.count()
    audits = AuditEntry.objects.count()

    response = operator.post("/catalog/create/", _typo(), headers=headers)

    assert response.status_code == 422
    form = _form(parse(response.content))
    assert [e.text for e in form.by_class("field-error")] == [NEAR_KIMI, NEAR_OAUTH]
    assert [i.attrs["name"] for i in form.by_tag("input") if i.attrs.get("type") == "checkbox"] == [
        "keep_as_typed"
    ]
    assert (BillingCatalogEntry.objects.count(), AuditEntry.objects.count()) == (count, audits)


def test_keep_as_typed_saves_the_name_exactly(operator: Client) -> None:
    response = operator.post(
        "/catalog/create/", _typo(keep_as_typed="on"), headers=htmx_headers("catalog-table")
    )

    assert response.status_code == 200
    entry = BillingCatalogEntry.objects.get(provider="kimmi")
    assert (entry.auth_type, entry.billing, entry.overage) == ("oath", "metered", "unknown")


def test_an_edit_to_a_near_miss_is_held_back_too(operator: Client) -> None:
    entry = BillingCatalogEntry.objects.get(provider="kimi")
    data = {**_typo(provider="claud", auth_type="oauth"), "version": str(entry.version)}

    response = operator.post(
        f"/catalog/{entry.pk}/update/", data, headers=htmx_headers("catalog-table")
    )

    assert response.status_code == 422
    errors = [e.text for e in parse(response.content).by_class("field-error")]
    assert errors[0].startswith("Did you mean “claude”? “claud” is not a known provider")
    assert BillingCatalogEntry.objects.get(pk=entry.pk).provider == "kimi"


@pytest.mark.parametrize("headers", [{}, htmx_headers("catalog-table")], ids=["page", "fragment"])
def test_each_entry_shows_its_number_with_an_anchor(
    operator: Client, headers: dict[str, str]
) -> None:
    page = parse(operator.get("/catalog/", headers=headers).content)

    entries = BillingCatalogEntry.objects.order_by("provider", "auth_type")
    for entry in entries:
        row = page.by_id(f"entry-{entry.pk}")
        (number,) = row.by_class("entry-number")
        assert [(a.text, a.attrs["href"]) for a in number.by_tag("a")] == [
            (str(entry.pk), f"#entry-{entry.pk}")
        ]


def test_the_connection_page_cites_its_entry_by_number_linking_to_it(operator: Client) -> None:
    entry = BillingCatalogEntry.objects.get(provider="claude", auth_type="oauth")

    page = parse(operator.get("/connections/claude-max-1/").content)

    links = page.find_all(
        lambda e: e.tag == "a" and e.attrs.get("href") == f"/catalog/#entry-{entry.pk}"
    )
    assert [a.text for a in links] == [f"catalog entry {entry.pk}"]
