"""An alias write resolves again every connection and candidate registered under its name:
deleting or repointing an alias changes exactly what a registration made after it would
have (once, a connection registered while a mistaken alias `kimi-rt3 -> claude` existed
stayed served as a Claude plan after the alias was deleted). Each row it moves is
audited under the alias write's actor and moves `state` once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from billing import services
from billing.models import AuditEntry, ChangeCounter
from ladder import services as ladder_services
from ladder.core import SUBSCRIPTION_AUTO_ID, Reason
from ladder.models import ApiToken, Candidate, Connection
from ladder.services import aliases as ladder_aliases
from tests.ladder.factories import (
    NOW,
    api,
    make_candidate,
    make_connection,
    make_reading,
    make_token,
)
from tests.worlds import signed_in

pytestmark = pytest.mark.django_db

ASKED = NOW + timedelta(seconds=30)


def _state() -> int:
    return int(ChangeCounter.objects.get(name=ChangeCounter.STATE).value)


def _register(connection_id: str) -> None:
    make_connection(connection_id, provider=" Kimi-RT3 ", auth_type="oauth")
    make_candidate("kimi-rt3", f"model-{connection_id}", connection_id=connection_id)
    make_reading(connection_id, remaining_percent=50.0)


def _standing(connection_id: str) -> tuple[str, str | None]:
    """(provider, reason it is left out of auto/subscription or None) as decided now."""
    decision = ladder_services.decide_registered(SUBSCRIPTION_AUTO_ID, now=ASKED)
    served = {c.connection_id for c in decision.candidates}
    reasons = {e.connection_id: e.reason for e in decision.excluded}
    provider = Connection.objects.get(connection_id=connection_id).provider
    reason = None if connection_id in served else reasons[connection_id].value
    return provider, reason


def test_deleting_an_alias_undoes_it_as_a_registration_after_the_delete_would() -> None:
    ladder_aliases.put_alias(services.AliasInput("kimi-rt3", "claude"), actor="ops")
    _register("kimi-1")
    assert _standing("kimi-1") == ("claude", None)  # served as a Claude plan
    state = _state()

    ladder_aliases.delete_alias("kimi-rt3", actor="ana")
    _register("kimi-2")  # the same registration, made after the delete

    assert _standing("kimi-1") == ("kimi-rt3", Reason.UNCURATED.value) == _standing("kimi-2")
    assert Candidate.objects.get(connection_id="kimi-1").provider == "kimi-rt3"
    assert _state() > state
    audit = AuditEntry.objects.filter(target_type="connection", target_id="kimi-1").latest("id")
    assert (audit.actor, audit.before["provider"], audit.after["provider"]) == (
        "ana",
        "claude",
        "kimi-rt3",
    )


def test_repointing_an_alias_moves_its_registrations_and_nothing_else() -> None:
    ladder_aliases.put_alias(services.AliasInput("kimi-rt3", "claude"), actor="ops")
    _register("kimi-1")
    make_connection("plan", provider="claude", auth_type="oauth")

    ladder_aliases.put_alias(services.AliasInput("kimi-rt3", "codex"), actor="ops")

    stored = dict(Connection.objects.values_list("connection_id", "provider"))
    assert stored == {"kimi-1": "codex", "plan": "claude"}


def test_an_alias_made_after_a_registration_applies_to_it() -> None:
    _register("kimi-1")
    assert _standing("kimi-1") == ("kimi-rt3", Reason.UNCURATED.value)
    audits = AuditEntry.objects.count()

    ladder_aliases.put_alias(services.AliasInput("kimi-rt3", "claude"), actor="ops")

    assert _standing("kimi-1") == ("claude", None)
    # The alias, the connection and the candidate.
    assert AuditEntry.objects.count() == audits + 3


def test_an_alias_write_that_moves_no_registration_leaves_state_alone() -> None:
    make_connection("plan", provider="claude", auth_type="oauth")
    state = _state()

    ladder_aliases.put_alias(services.AliasInput("kimi-rt3", "claude"), actor="ops")
    ladder_aliases.delete_alias("kimi-rt3", actor="ops")

    assert _state() == state


def test_the_api_and_the_connection_page_show_the_registered_name_and_its_resolution(
    client: Client,
) -> None:
    ladder_aliases.put_alias(services.AliasInput("kimi-rt3", "claude"), actor="ops")
    _register("kimi-1")
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)

    body: dict[str, Any] = api("get", "/api/v1/connections/kimi-1", gateway).json()
    candidates = api("get", "/api/v1/candidates", gateway).json()
    page = signed_in(client, "olga", "operator").get("/connections/kimi-1/").content.decode()

    assert (body["provider"], body["registered_provider"]) == ("claude", "kimi-rt3")
    assert [(c["provider"], c["registered_provider"]) for c in candidates] == [
        ("claude", "kimi-rt3")
    ]
    assert "registered as <code>kimi-rt3</code>" in page
