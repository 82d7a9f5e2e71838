"""Sign in and sign out: Django's views with the dashboard's `Vary: HX-Request`."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponseBase

from ladder.web.login_throttle import ThrottledAuthenticationForm
from omniroute_admin.dashboard import vary_on_htmx


def _with_headers(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return vary_on_htmx(view(request, *args, **kwargs))

    return wrapped


login = _with_headers(
    auth_views.LoginView.as_view(
        template_name="registration/login.html",
        redirect_authenticated_user=True,
        authentication_form=ThrottledAuthenticationForm,
    )
)
logout = _with_headers(auth_views.LogoutView.as_view())
