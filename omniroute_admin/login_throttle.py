"""Throttling of failed sign-ins, on the dashboard's sign-in page and the Django admin's
alike: after too many failures for one user name from one address (or from one address
overall) within a window, further attempts are refused before the password is checked.
Both pages count against the same budget, so alternating between them gains nothing.
Counts live in Django's cache (set CACHE_URL to a shared cache such as Redis when running
several web processes)."""

from __future__ import annotations

import hashlib
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest

THROTTLED_MESSAGE = (
    "Too many failed sign-ins. Wait %(minutes)d minutes and try again, or ask an "
    "operator to reset your password."
)


def _client_address(request: HttpRequest | None) -> str:
    if request is None:
        return "unknown"
    return str(request.META.get("REMOTE_ADDR") or "unknown")


def _key(*parts: str) -> str:
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"login-failures:{digest}"


class _ThrottledSignIn(AuthenticationForm):
    """The throttle, around any AuthenticationForm's clean()."""

    def _keys(self) -> tuple[str, str]:
        username = str(self.data.get("username", "")).strip().lower()
        address = _client_address(self.request)
        return _key("user", username, address), _key("address", address)

    def clean(self) -> dict[str, Any]:
        user_key, address_key = self._keys()
        window = settings.LOGIN_FAILURE_WINDOW_SECONDS
        if (cache.get(user_key, 0) >= settings.LOGIN_MAX_FAILURES_PER_USER) or (
            cache.get(address_key, 0) >= settings.LOGIN_MAX_FAILURES_PER_ADDRESS
        ):
            raise forms.ValidationError(
                THROTTLED_MESSAGE, code="throttled", params={"minutes": max(1, window // 60)}
            )
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            for key in (user_key, address_key):
                cache.add(key, 0, timeout=window)
                try:
                    cache.incr(key)
                except ValueError:  # expired between add and incr
                    cache.set(key, 1, timeout=window)
            raise
        cache.delete(user_key)
        return cleaned


class ThrottledAuthenticationForm(_ThrottledSignIn):
    """Django's sign-in form (the dashboard's), refusing attempts once the budget is spent."""


class ThrottledAdminAuthenticationForm(_ThrottledSignIn, AdminAuthenticationForm):
    """The Django admin's sign-in form (staff only), under the same throttle and budget."""
