"""The connection page offers to curate a connection as hard-stop when its live evidence
says "hard stop" and the catalog does not (spec/ladder.md, "Billing evidence from the
wire": evidence never makes a connection safer on its own; the dashboard offers the
operator to curate it). The offer opens the catalog's form preset; nothing is saved
until the operator saves."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from billing.models import BillingCatalogEntry
from ladder.core.types import OverageEvidence, OverageSays
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_connection, make_reading
from tests.pages import parse
from tests.worlds import signed_in

pytestmark = pytest.mark.django_db

HARD_STOP = OverageEvidence(OverageSays.HARD_STOP, "overage_permitted: false on every snapshot")
REASON = "Live evidence says hard stop: overage_permitted: false on every snapshot"


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


def _offer(client: Client, connection_id: str) -> tuple[str, dict[str, list[str]]]:
    page = parse(client.get(f"/connections/{connection_id}/").content)
    link = page.by_id("curate-hard-stop")
    href = str(link.attrs["href"])
    return link.text, parse_qs(urlsplit(href).query)


def test_unknown_overage_with_hard_stop_evidence_offers_to_edit_its_entry_preset(
    operator: Client,
) -> None:
    make_connection("copilot-1", provider="copilot", auth_type="apikey")
    make_reading("copilot-1", remaining_percent=60.0, evidence=HARD_STOP)
    entry = BillingCatalogEntry.objects.get(provider="copilot", auth_type="apikey")

    text, query = _offer(operator, "copilot-1")

    assert text == "curate copilot apikey as hard-stop"
    assert query == {"edit": [str(entry.pk)], "overage": ["hard-stop"], "reason": [REASON]}
    form = parse(operator.get("/catalog/", {k: v[0] for k, v in query.items()}).content)
    selected = form.by_id("edit-overage").find_all(lambda e: "selected" in e.attrs)
    assert [option.attrs["value"] for option in selected] == ["hard-stop"]
    assert form.by_id("edit-reason").text == REASON
    assert form.by_id("edit-provider").attrs["value"] == "copilot"
    # Nothing changed until the operator saves.
    assert BillingCatalogEntry.objects.get(pk=entry.pk).overage == "unknown"


def test_an_uncurated_connection_gets_the_new_entry_form_preset() -> None:
    make_connection("acme-1", provider="acme", auth_type="oauth")
    make_reading("acme-1", remaining_percent=60.0, evidence=HARD_STOP)
    client = signed_in(Client(), "olga", "operator")

    _, query = _offer(client, "acme-1")

    assert query == {
        "provider": ["acme"],
        "auth_type": ["oauth"],
        "billing": ["subscription"],
        "overage": ["hard-stop"],
        "reason": [REASON],
    }
    form = parse(client.get("/catalog/", {k: v[0] for k, v in query.items()}).content)
    assert form.by_id("new-provider").attrs["value"] == "acme"
    billing = form.by_id("new-billing").find_all(lambda e: "selected" in e.attrs)
    assert [option.attrs["value"] for option in billing] == ["subscription"]
    assert not BillingCatalogEntry.objects.filter(provider="acme").exists()


def test_a_viewer_reads_the_offer_without_a_link() -> None:
    make_connection("copilot-1", provider="copilot", auth_type="apikey")
    make_reading("copilot-1", remaining_percent=60.0, evidence=HARD_STOP)
    viewer = signed_in(Client(), "victor", "viewer")

    page = parse(viewer.get("/connections/copilot-1/").content)

    assert page.find_all(lambda e: e.attrs.get("id") == "curate-hard-stop") == []
    assert page.by_id("billing-evidence").text.endswith(
        "The catalog says unknown, and evidence never makes a connection safer on its own: "
        "an operator may curate it as hard-stop."
    )


def test_hard_stop_evidence_on_a_hard_stop_entry_offers_nothing(operator: Client) -> None:
    make_connection("claude-max-1")
    make_reading(remaining_percent=60.0, evidence=HARD_STOP)

    page = parse(operator.get("/connections/claude-max-1/").content)

    assert page.find_all(lambda e: e.attrs.get("id") == "curate-hard-stop") == []
