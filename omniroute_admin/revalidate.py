"""Dashboard answers that the browser revalidates: a live part polled every few seconds
costs a 304 with no body while nothing on it changed.

Each page or fragment a dashboard GET renders gets a strong ETag, the hash of its bytes,
with `Cache-Control: no-cache, private` (the browser keeps it and asks again on every
poll; no shared cache keeps it) and `Vary: Cookie`; a request whose `If-None-Match`
names the ETag is answered 304. The hash is taken after rendering, so it is exact
whatever changed (a reading, a setting, a cooldown ending as time passes): the 304 runs
the same queries as the 200 and saves the bytes, not the work.

Two things must not defeat or mislead it (docs/DASHBOARD.md, "Live updates"):

- The CSRF token in a form is masked afresh on every render, so bytes differ while
  nothing changed. Tokens of this browser's secret are hashed as one placeholder, and the
  secret itself goes into the hash: the kept copy's token is valid exactly while the
  secret is the same one.
- Another user must never be answered 304 for what a first user was shown (one browser,
  a sign-out and a sign-in): the user's id goes into the hash too, and the secret is
  rotated at every sign-in."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.middleware.csrf import CSRF_ALLOWED_CHARS
from django.template.response import TemplateResponse
from django.utils.cache import get_conditional_response, patch_cache_control, patch_vary_headers

# A masked CSRF token: 64 of the allowed characters (a 32-character mask, then the secret
# enciphered with it).
_MASKED_TOKEN = re.compile(rb"(?<![A-Za-z0-9])[A-Za-z0-9]{64}(?![A-Za-z0-9])")
_SECRET_LENGTH = 32
_TOKEN_PLACEHOLDER = b"csrf-token"


def unmasked(token: str) -> str:
    """The secret a masked CSRF token enciphers (Django's masking: each character of the
    secret shifted by the mask's character at the same place)."""
    mask, cipher = token[:_SECRET_LENGTH], token[_SECRET_LENGTH:]
    chars = CSRF_ALLOWED_CHARS
    return "".join(
        chars[(chars.index(c) - chars.index(m)) % len(chars)]
        for c, m in zip(cipher, mask, strict=True)
    )


def etag_of(content: bytes, *, user_id: object, csrf_secret: str) -> str:
    """The strong ETag of a rendered answer for this user and this browser's CSRF secret:
    equal for equal bytes, whatever masks the render gave the secret's tokens."""

    def placeholder(match: re.Match[bytes]) -> bytes:
        token = match.group().decode("ascii")
        return _TOKEN_PLACEHOLDER if unmasked(token) == csrf_secret else match.group()

    body = _MASKED_TOKEN.sub(placeholder, content) if csrf_secret else content
    digest = hashlib.sha256(f"{user_id}\0{csrf_secret}\0".encode())
    digest.update(body)
    return f'"{digest.hexdigest()[:40]}"'


def answered_or_unchanged(request: HttpRequest) -> Callable[[HttpResponse], HttpResponseBase]:
    """A post-render callback: tag the rendered answer, or answer 304 in its place."""

    def revalidated(response: HttpResponse) -> HttpResponseBase:
        etag = etag_of(
            response.content,
            user_id=getattr(request.user, "pk", None),
            csrf_secret=request.META.get("CSRF_COOKIE", ""),
        )
        response.headers["ETag"] = etag
        patch_cache_control(response, no_cache=True, private=True)
        patch_vary_headers(response, ("Cookie",))
        return get_conditional_response(request, etag=etag, response=response) or response

    return revalidated


def revalidate(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    """Make a dashboard GET's rendered page or fragment revalidated (see the module)."""
    if (
        request.method == "GET"
        and isinstance(response, TemplateResponse)
        and response.status_code == 200
    ):
        response.add_post_render_callback(answered_or_unchanged(request))
    return response
