"""Project middleware: a request body limit, security headers, gzip for the dashboard's
HTML and an idle session timeout. Each is small and does one thing."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.middleware.gzip import GZipMiddleware, re_accepts_gzip
from django.utils.cache import has_vary_header, patch_vary_headers

API_PREFIXES = ("/api/", "/v1/")


def is_api_path(path: str) -> bool:
    """Paths whose errors are JSON."""
    return path.startswith(API_PREFIXES)


def too_large(request: HttpRequest) -> HttpResponse:
    """The 413 answer: JSON for the API, plain text elsewhere."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    message = f"The request body is larger than the limit of {limit} bytes."
    if is_api_path(request.path):
        return JsonResponse({"detail": message}, status=413)
    return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")


class BodySizeLimitMiddleware:
    """Refuse a declared body over the limit before anything reads it (413, not 400/500)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and declared.isdigit() and int(declared) > limit:
            return too_large(request)
        return self.get_response(request)


class SecurityHeadersMiddleware:
    """A strict Content-Security-Policy (no inline script or style, no framing) and a
    Permissions-Policy; Django's own middleware sets nosniff and the referrer policy."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        response.headers.setdefault(
            "Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()"
        )
        return response


class DashboardGZipMiddleware(GZipMiddleware):
    """Gzip for HTML only: the dashboard's pages and live fragments (a changed poll of the
    candidates travels as about a ninth of its bytes), its sign-in and the Django admin.
    Never the API, whose hot path must not pay for compression, nor anything streamed (a
    CSV export: its first bytes would wait for a compressed block), nor other types.
    Django's middleware adds random bytes to each answer against BREACH ("Heal The
    Breach"), CSRF tokens are masked afresh per answer and no secret a client can probe
    is shown on a GET; it makes a strong ETag weak (the compressed bytes differ every
    time), which If-None-Match compares alike."""

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if is_api_path(request.path) or response.streaming:
            return response
        if response.status_code == 304 and has_vary_header(response, "HX-Request"):
            return self._as_its_200_would(request, response)
        if not response.get("Content-Type", "").startswith("text/html"):
            return response
        return super().process_response(request, response)

    @staticmethod
    def _as_its_200_would(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        """A dashboard's 304 (`Vary: HX-Request`, omniroute_admin/dashboard.py) names the
        ETag and Vary its 200 would have had (weak once gzipped), so the browser's kept
        copy is the one it updates."""
        patch_vary_headers(response, ("Accept-Encoding",))
        etag = response.get("ETag", "")
        accepts = re_accepts_gzip.search(request.META.get("HTTP_ACCEPT_ENCODING", ""))
        if accepts and etag.startswith('"'):
            response.headers["ETag"] = "W/" + etag
        return response


class IdleSessionTimeoutMiddleware:
    """Sign a dashboard user out after SESSION_IDLE_TIMEOUT_SECONDS without activity;
    SESSION_COOKIE_AGE is the absolute limit. Live-update polls (htmx GETs) are not
    activity: a dashboard left open on a screen still times out."""

    KEY = "last_seen"
    SIGNED_IN_KEY = "signed_in_at"
    # Writing the session on every request would be a write per poll; a minute is plenty.
    RESOLUTION_SECONDS = 60.0

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_path(request.path):  # token auth only: never touch the session here
            return self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            now = time.time()
            last_seen = request.session.get(self.KEY)
            signed_in_at = request.session.setdefault(self.SIGNED_IN_KEY, now)
            is_idle = (
                last_seen is not None
                and now - float(last_seen) > settings.SESSION_IDLE_TIMEOUT_SECONDS
            )
            # Saving the session moves its cookie expiry on, so the absolute limit is
            # enforced here, from the first request of the session.
            is_too_old = now - float(signed_in_at) > settings.SESSION_COOKIE_AGE
            if is_idle or is_too_old:
                logout(request)
            elif not self._is_poll(request) and (
                last_seen is None or now - float(last_seen) > self.RESOLUTION_SECONDS
            ):
                request.session[self.KEY] = now
        return self.get_response(request)

    @staticmethod
    def _is_poll(request: HttpRequest) -> bool:
        return request.method == "GET" and request.headers.get("HX-Request") == "true"
