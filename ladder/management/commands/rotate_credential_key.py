"""`python manage.py rotate_credential_key`: re-encrypt every stored credential (and every
webhook's signing secret) with the primary (first) key of OMNIROUTE_CREDENTIAL_KEY. Put the
new key first and keep the old one after it until this has run; then the old key can be
removed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from ladder.crypto import (
    CredentialDecryptError,
    CredentialKeyMissing,
    parse_keys,
    reencrypt_credential,
)
from ladder.models import Connection, Webhook


class Command(BaseCommand):
    help = "Re-encrypt every stored credential with the primary credential key (all or none)."

    def handle(self, *args: Any, **options: Any) -> None:
        from django.conf import settings

        keys = parse_keys(settings.OMNIROUTE_CREDENTIAL_KEY or "")
        if not keys:
            raise CommandError("OMNIROUTE_CREDENTIAL_KEY is not set.")
        primary = keys[0][0]
        rotated = already = 0
        with transaction.atomic():
            rows = Connection.objects.select_for_update().exclude(credential_ciphertext="")
            for connection in rows:
                if connection.credential_ciphertext.startswith(f"{primary}:"):
                    already += 1
                    continue
                try:
                    connection.credential_ciphertext = reencrypt_credential(
                        connection.credential_ciphertext
                    )
                except (CredentialKeyMissing, CredentialDecryptError) as error:
                    raise CommandError(
                        f"Connection {connection.connection_id!r}: {error} Nothing was changed."
                    ) from error
                connection.save(update_fields=["credential_ciphertext"])
                rotated += 1
            # Webhook signing secrets are encrypted the same way, so they rotate too.
            for webhook in Webhook.objects.select_for_update():
                if webhook.secret_ciphertext.startswith(f"{primary}:"):
                    already += 1
                    continue
                try:
                    webhook.secret_ciphertext = reencrypt_credential(webhook.secret_ciphertext)
                except (CredentialKeyMissing, CredentialDecryptError) as error:
                    raise CommandError(
                        f"Webhook {webhook.name!r}: {error} Nothing was changed."
                    ) from error
                webhook.save(update_fields=["secret_ciphertext"])
                rotated += 1
        self.stdout.write(f"re-encrypted {rotated}, already on key {primary!r}: {already}")
