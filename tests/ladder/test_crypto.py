"""Credentials are encrypted at rest with a key id, and never stored without a key."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.test import override_settings

from ladder import services
from ladder.crypto import (
    CredentialDecryptError,
    CredentialKeyMissing,
    decrypt_credential,
    encrypt_credential,
    reencrypt_credential,
)
from ladder.models import Connection

KEY_A = "a:" + Fernet.generate_key().decode()
KEY_B = "b:" + Fernet.generate_key().decode()


def test_round_trip_carries_the_key_id() -> None:
    with override_settings(OMNIROUTE_CREDENTIAL_KEY=KEY_A):
        stored = encrypt_credential("sk-secret")

        assert stored.startswith("a:")
        assert "sk-secret" not in stored
        assert decrypt_credential(stored) == "sk-secret"


def test_without_a_key_nothing_can_be_encrypted() -> None:
    with override_settings(OMNIROUTE_CREDENTIAL_KEY=""), pytest.raises(CredentialKeyMissing):
        encrypt_credential("sk-secret")


def test_a_tampered_value_is_an_error_never_the_ciphertext() -> None:
    with override_settings(OMNIROUTE_CREDENTIAL_KEY=KEY_A):
        stored = encrypt_credential("sk-secret")
        tampered = stored[:-4] + ("AAAA" if not stored.endswith("AAAA") else "BBBB")

        with pytest.raises(CredentialDecryptError):
            decrypt_credential(tampered)


def test_rotation_decrypts_with_the_old_key_and_encrypts_with_the_new() -> None:
    with override_settings(OMNIROUTE_CREDENTIAL_KEY=KEY_A):
        old = encrypt_credential("sk-secret")

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=f"{KEY_B},{KEY_A}"):
        new = reencrypt_credential(old)

        assert new.startswith("b:")
        assert decrypt_credential(new) == "sk-secret"


@pytest.mark.django_db
def test_connection_credential_is_stored_encrypted_and_refused_without_a_key() -> None:
    services.upsert_connection(
        "c1", services.ConnectionInput("claude", "oauth", credential="sk-live-canary")
    )
    stored = Connection.objects.get(connection_id="c1").credential_ciphertext

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=""), pytest.raises(CredentialKeyMissing):
        services.upsert_connection(
            "c1", services.ConnectionInput("claude", "oauth", credential="sk-other")
        )

    assert "sk-live-canary" not in stored
    assert decrypt_credential(stored) == "sk-live-canary"
    assert Connection.objects.get(connection_id="c1").credential_ciphertext == stored


@pytest.mark.django_db
def test_rotate_credential_key_reencrypts_everything_with_the_primary_key() -> None:
    from io import StringIO

    from django.core.management import call_command

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=KEY_A):
        for index in range(3):
            services.upsert_connection(
                f"c{index}", services.ConnectionInput("claude", "oauth", credential=f"sk-{index}")
            )
    out = StringIO()

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=f"{KEY_B},{KEY_A}"):
        call_command("rotate_credential_key", stdout=out)

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=KEY_B):
        values = [
            decrypt_credential(c.credential_ciphertext)
            for c in Connection.objects.order_by("connection_id")
        ]
    assert out.getvalue().strip() == "re-encrypted 3, already on key 'b': 0"
    assert values == ["sk-0", "sk-1", "sk-2"]


@pytest.mark.django_db
def test_rotation_without_the_old_key_changes_nothing() -> None:
    from django.core.management import CommandError, call_command

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=KEY_A):
        services.upsert_connection(
            "c1", services.ConnectionInput("claude", "oauth", credential="x")
        )
    before = Connection.objects.get().credential_ciphertext

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=KEY_B), pytest.raises(CommandError):
        call_command("rotate_credential_key")

    assert Connection.objects.get().credential_ciphertext == before


@pytest.mark.django_db
def test_rotate_credential_key_reencrypts_webhook_secrets_too() -> None:
    from io import StringIO

    from django.core.management import call_command

    from ladder.models import Webhook
    from tests.ladder.factories import WEBHOOK_SECRET, make_webhook

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=KEY_A):
        services.upsert_connection(
            "c1", services.ConnectionInput("claude", "oauth", credential="sk-1")
        )
        make_webhook()
    out = StringIO()

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=f"{KEY_B},{KEY_A}"):
        call_command("rotate_credential_key", stdout=out)

    with override_settings(OMNIROUTE_CREDENTIAL_KEY=KEY_B):
        secret = decrypt_credential(Webhook.objects.get().secret_ciphertext)
    assert out.getvalue().strip() == "re-encrypted 2, already on key 'b': 0"
    assert secret == WEBHOOK_SECRET
