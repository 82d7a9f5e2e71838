"""Credentials encrypted at rest: Fernet (AES-CBC with HMAC-SHA256, authenticated) with a
key id, so keys can be rotated.

`OMNIROUTE_CREDENTIAL_KEY` holds one or more `key_id:fernet_key` pairs separated by
commas; the first encrypts, all decrypt. Stored values are `key_id:token`. Without a
key nothing is stored; a value that fails to decrypt raises, never returns ciphertext.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class CredentialKeyMissing(Exception):
    """No credential key is configured (or the stored value's key id is unknown)."""


class CredentialDecryptError(Exception):
    """A stored credential failed authentication: tampered, or encrypted with another key."""


def parse_keys(value: str) -> list[tuple[str, Fernet]]:
    """Parse `id:key[,id:key...]`; raises ValueError naming what is wrong (never the key)."""
    keys: list[tuple[str, Fernet]] = []
    for index, part in enumerate(p.strip() for p in value.split(",") if p.strip()):
        key_id, sep, key = part.partition(":")
        if not sep or not key_id or not key:
            raise ValueError(f"credential key #{index + 1} must look like 'key_id:fernet_key'")
        try:
            keys.append((key_id, Fernet(key.encode())))
        except ValueError as error:
            raise ValueError(f"credential key {key_id!r} is not a valid Fernet key") from error
    return keys


def _keys() -> list[tuple[str, Fernet]]:
    keys = parse_keys(settings.OMNIROUTE_CREDENTIAL_KEY or "")
    if not keys:
        raise CredentialKeyMissing(
            "OMNIROUTE_CREDENTIAL_KEY is not set: credentials cannot be stored or read."
        )
    return keys


def encrypt_credential(plaintext: str) -> str:
    """Encrypt with the primary key; the result carries its key id."""
    key_id, fernet = _keys()[0]
    return f"{key_id}:{fernet.encrypt(plaintext.encode()).decode()}"


def decrypt_credential(stored: str) -> str:
    """Decrypt a stored value with the key its id names."""
    key_id, sep, token = stored.partition(":")
    keys = dict(_keys())
    if not sep or key_id not in keys:
        raise CredentialKeyMissing(f"No configured credential key has the id {key_id!r}.")
    try:
        return keys[key_id].decrypt(token.encode()).decode()
    except InvalidToken as error:
        raise CredentialDecryptError(
            f"The stored credential does not authenticate under key {key_id!r}."
        ) from error


def reencrypt_credential(stored: str) -> str:
    """Decrypt with whichever key encrypted it and encrypt again with the primary key."""
    return encrypt_credential(decrypt_credential(stored))
