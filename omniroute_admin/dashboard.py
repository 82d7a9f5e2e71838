"""The dashboard kit every app's views share: the typed HTMX request, the roles and the
access guards, the clock, `render` / `done`, which answer a page or the fragment an HTMX
request asks for, and `page_unavailable`, the error state when the database does not.

Access: every page needs a login and a role (the `viewer` or `operator` group, or a
superuser); writes need `operator`. Every dashboard response carries `Vary: HX-Request`
(the same URL answers with a page or a fragment, and no cache may mix them up), set here
by `patch_vary_headers` in the access decorators rather than by a middleware; every page
and fragment a GET renders is revalidated by its ETag (`omniroute_admin.revalidate`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from enum import StrEnum
from functools import wraps
from typing import Any, TypeVar

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.html import escape
from django.utils.http import urlencode
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from omniroute_admin.revalidate import revalidate
from omniroute_admin.text import without_bad_characters


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware."""

    htmx: HtmxDetails


ViewFunction = TypeVar("ViewFunction", bound=Callable[..., HttpResponseBase])

POLL_SECONDS = 5


def current_time() -> datetime:
    """The clock of every dashboard view (tests replace it to pin `now`)."""
    return timezone.now()


# --- roles and access ---------------------------------------------------------------------


class Role(StrEnum):
    """What a signed-in user may do in the dashboard."""

    SUPERUSER = "superuser"
    OPERATOR = "operator"
    VIEWER = "viewer"

    @property
    def can_edit(self) -> bool:
        """Operators and superusers edit; viewers read everything and edit nothing."""
        return self is not Role.VIEWER


ROLE_CACHE_KEY = "_dashboard_role"


def role_of(user: AbstractBaseUser | AnonymousUser) -> Role | None:
    """The user's dashboard role (one query, cached on the user); None: no access."""
    if not user.is_authenticated or not user.is_active:
        return None
    if ROLE_CACHE_KEY in user.__dict__:
        cached: Role | None = user.__dict__[ROLE_CACHE_KEY]
        return cached
    role: Role | None
    if getattr(user, "is_superuser", False):
        role = Role.SUPERUSER
    else:
        names = set(
            Group.objects.filter(
                user__pk=user.pk, name__in=(Role.OPERATOR, Role.VIEWER)
            ).values_list("name", flat=True)
        )
        role = Role.OPERATOR if Role.OPERATOR in names else Role.VIEWER if names else None
    user.__dict__[ROLE_CACHE_KEY] = role
    return role


def vary_on_htmx(response: HttpResponseBase) -> HttpResponseBase:
    """`Vary: HX-Request`: the same URL answers with a page or a fragment."""
    patch_vary_headers(response, ("HX-Request",))
    return response


def _guard(view: ViewFunction, *, needs_operator: bool) -> ViewFunction:
    @wraps(view)
    def guarded(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            if request.htmx:
                # A fragment request must not swap the login page into a page: send the
                # browser there instead, back to the page it was on afterwards.
                next_url = request.htmx.current_url_abs_path or "/"
                return vary_on_htmx(
                    HttpResponseClientRedirect(
                        f"{settings.LOGIN_URL}?{urlencode({'next': next_url})}"
                    )
                )
            return vary_on_htmx(redirect_to_login(request.get_full_path()))
        role = role_of(request.user)
        if role is None:
            raise PermissionDenied("This account has no dashboard role (viewer or operator).")
        if needs_operator and not role.can_edit:
            raise PermissionDenied("Only operators can change this.")
        try:
            response = view(request, *args, **kwargs)
        except Http404 as missing:
            # The dashboard's own page (with its navigation), also under DEBUG, where
            # Django would otherwise answer with its technical 404 page.
            response = not_found_page(request, str(missing))
        return vary_on_htmx(revalidate(request, response))

    return guarded  # type: ignore[return-value]


def viewer_required(view: ViewFunction) -> ViewFunction:
    """Signed in with any dashboard role (anonymous: to the login page)."""
    return _guard(view, needs_operator=False)


def operator_required(view: ViewFunction) -> ViewFunction:
    """Signed in as an operator or a superuser; a viewer gets a 403 and nothing changes."""
    return _guard(view, needs_operator=True)


def render(
    request: HtmxHttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partials: Sequence[str],
    status: int = 200,
) -> TemplateResponse:
    """The whole page, or for an HTMX request the partial named by its target (else the
    page's first partial; a page without partials is answered whole)."""
    name = template
    if request.htmx and not request.htmx.history_restore_request and partials:
        target = request.htmx.target
        name = f"{template}#{target if target in partials else partials[0]}"
    role = role_of(request.user)
    page_context = {
        "role": role,
        "can_edit": role is not None and role.can_edit,
        "poll_seconds": POLL_SECONDS,
        **context,
    }
    return TemplateResponse(request, name, page_context, status=status)


NOT_FOUND_TEMPLATE = "404.html"


def not_found_page(request: HtmxHttpRequest, message: str) -> TemplateResponse:
    """The dashboard's 404: the page, or its `not-found` fragment for HTMX."""
    return render(
        request, NOT_FOUND_TEMPLATE, {"missing": message}, partials=("not-found",), status=404
    )


# The dashboard's error state. Built without the database (no session, no user, no
# context processors): it is what a request gets when the database does not answer.
NOT_ANSWERING = "The database is not answering."
DOWN = "The database is unavailable."
WRITE_CUT_OFF = (
    "The database did not answer in time: your change may or may not have been saved. "
    "Reload the page to check before you try again."
)
WRITE_FAILED = (
    "The database is unavailable: your change was probably not saved. "
    "Reload the page to check before you try again."
)


def page_unavailable(request: HttpRequest, *, answered: bool) -> HttpResponse:
    """The 503 a dashboard request gets when the database did not answer in time
    (`answered=False`) or answered with an error: for an htmx request a line for the
    page's error box (the part it asked for stays, and its poll goes on), for a page a
    small page that reloads itself (GET), for /readyz and /metrics their own formats."""
    if request.path == "/readyz":
        problem = "OperationalError" if answered else "DeadlinePassed"
        down = {"status": "unavailable", "down": {"database": problem}}
        response: HttpResponse = JsonResponse(down, status=503)
    elif request.path == "/metrics":
        response = HttpResponse(
            "# metrics unavailable: DeadlinePassed\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    else:
        is_read = request.method in ("GET", "HEAD")
        if is_read:
            message = f"{DOWN if answered else NOT_ANSWERING} "
            message += f"Live parts of this page retry every {POLL_SECONDS} s."
        else:
            message = WRITE_FAILED if answered else WRITE_CUT_OFF
        is_htmx = request.headers.get("HX-Request") == "true"
        if is_htmx:
            content = f'<span class="request-error-text">{escape(message)}</span>'
        else:
            context = {"message": message, "reload_seconds": POLL_SECONDS if is_read else None}
            content = render_to_string("unavailable.html", context)
        response = HttpResponse(content, status=503, content_type="text/html; charset=utf-8")
        if is_htmx:
            # Into the page's error box (templates/base.html, static/dashboard.js), not
            # over the part that asked: a polled part keeps its content and its poll.
            response["HX-Retarget"] = "#request-error"
            response["HX-Reswap"] = "innerHTML"
        response["Vary"] = "HX-Request"
    response["Retry-After"] = str(POLL_SECONDS)
    response["Cache-Control"] = "no-store"
    # The security middleware above the deadline's adds the rest; clickjacking's comes later.
    response["X-Frame-Options"] = "DENY"
    return response


def done(
    request: HtmxHttpRequest,
    message: str,
    url: str,
    *,
    render_partial: Callable[[], TemplateResponse],
) -> HttpResponseBase:
    """After a successful write: the refreshed partial for HTMX, else a redirect (PRG)
    with the message flashed for the next page."""
    if request.htmx:
        return render_partial()
    messages.success(request, message)
    return redirect(url)


def search_param(request: HttpRequest, name: str = "q") -> str:
    """A search string from the query: control characters dropped (PostgreSQL refuses a
    NUL in a parameter: `?q=%00` must search, never crash), at most 100 characters."""
    return without_bad_characters(request.GET.get(name, "")).strip()[:100]


def int_param(request: HttpRequest, name: str) -> int | None:
    """A non-negative id from the query (`?edit=3`); None when absent or not one."""
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() and len(value) < 19 else None


# Dashboard URL names a viewer may POST to: signing out is not a change.
VIEWER_POSTS = frozenset({"login", "logout"})
DASHBOARD_APPS = frozenset({"ladder", "billing"})


class ViewerWritesForbiddenMiddleware:
    """A viewer's write to any dashboard URL is a 403, whatever the URL's methods: the
    answer is "you may not change this", not "this URL takes no POST" (a 405 would hide
    the reason, and differ between the pages and the write URLs)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> None:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return
        match = request.resolver_match
        if match is None or match.app_name not in DASHBOARD_APPS:
            return
        if match.url_name in VIEWER_POSTS or not request.user.is_authenticated:
            return
        role = role_of(request.user)
        if role is not None and not role.can_edit:
            raise PermissionDenied("Only operators can change this.")
