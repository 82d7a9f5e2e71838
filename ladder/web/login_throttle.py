"""Throttling of failed sign-ins, on the dashboard's sign-in page and the Django admin's
alike: after too many failures for one user name from one address (or from one address
overall) within a window, further attempts are refused before the password is checked.
Both pages count against the same budget, so alternating between them gains nothing.
Counts live in Django's cache (set CACHE_URL to a shared cache such as Redis when running
several web processes).

With that cache down the throttle fails open: the attempt is checked by its password
alone, a warning is logged and `omniroute_login_throttle_unavailable_total` counts it,
so an outage of the cache never locks operators out of the dashboard or the admin (nor
answers their sign-in with a 500). The passwords' hashing still slows guessing."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest

from ladder.metrics import LOGIN_THROTTLE_UNAVAILABLE

logger = logging.getLogger(__name__)

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
        try:
            throttled = self._throttled(user_key, address_key)
        except Exception as error:  # the cache is down: fail open, logged and counted
            _unavailable("read", error)
            return super().clean()
        if throttled:
            window = settings.LOGIN_FAILURE_WINDOW_SECONDS
            raise forms.ValidationError(
                THROTTLED_MESSAGE, code="throttled", params={"minutes": max(1, window // 60)}
            )
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            try:
                _count_failure(user_key, address_key)
            except Exception as error:  # as above: the failure goes uncounted
                _unavailable("count", error)
            raise
        try:
            cache.delete(user_key)
        except Exception as error:
            _unavailable("reset", error)
        return cleaned

    @staticmethod
    def _throttled(user_key: str, address_key: str) -> bool:
        return bool(
            cache.get(user_key, 0) >= settings.LOGIN_MAX_FAILURES_PER_USER
            or cache.get(address_key, 0) >= settings.LOGIN_MAX_FAILURES_PER_ADDRESS
        )


def _count_failure(*keys: str) -> None:
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    for key in keys:
        cache.add(key, 0, timeout=window)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=window)


def _unavailable(step: str, error: Exception) -> None:
    """The cache did not answer: the attempt goes on unthrottled, logged and counted."""
    LOGIN_THROTTLE_UNAVAILABLE.inc()
    logger.warning(
        "sign-in throttle unavailable (%s failed: %s): attempt let through unthrottled",
        step,
        type(error).__name__,
    )


class ThrottledAuthenticationForm(_ThrottledSignIn):
    """Django's sign-in form (the dashboard's), refusing attempts once the budget is spent."""


class ThrottledAdminAuthenticationForm(_ThrottledSignIn, AdminAuthenticationForm):
    """The Django admin's sign-in form (staff only), under the same throttle and budget."""
