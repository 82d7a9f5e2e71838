"""The API tokens page: list, create (the secret shown once) and revoke."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET, require_POST

from ladder.forms import TokenForm
from ladder.models import ApiToken
from ladder.tokens import create_token, revoke_token
from omniroute_admin.dashboard import (
    HtmxHttpRequest,
    done,
    int_param,
    operator_required,
    render,
    viewer_required,
)


def tokens_context(form: TokenForm, **extra: Any) -> dict[str, Any]:
    """Every token, newest first, and the create form."""
    return {"tokens": list(ApiToken.objects.all()), "form": form, **extra}


@require_GET
@viewer_required
def tokens(request: HtmxHttpRequest) -> TemplateResponse:
    """API tokens: name, scope, prefix, created, last used, revoked."""
    revoking = int_param(request, "revoke")
    return render(
        request,
        "ladder/tokens.html",
        tokens_context(TokenForm(), revoking=revoking),
        partials=("token-table",),
    )


@require_POST
@operator_required
def token_create(request: HtmxHttpRequest) -> HttpResponseBase:
    """Create a token and show its secret this once (never stored, never shown again)."""
    form = TokenForm(request.POST)
    if not form.is_valid():
        return render(
            request,
            "ladder/tokens.html",
            tokens_context(form),
            partials=("token-table",),
            status=422,
        )
    token, secret = create_token(
        form.cleaned_data["name"],
        form.cleaned_data["scope"],
        created_by=request.user.get_username(),
    )
    response = render(
        request,
        "ladder/tokens.html",
        tokens_context(TokenForm(), created=token, secret=secret),
        partials=("token-table",),
        status=201 if request.htmx else 200,
    )
    # The secret is in this response alone: no cache may keep it.
    patch_cache_control(response, no_store=True, private=True)
    return response


@require_POST
@operator_required
def token_revoke(request: HtmxHttpRequest, token_id: int) -> HttpResponseBase:
    """Revoke a token: it authenticates nothing from now on."""
    if not ApiToken.objects.filter(pk=token_id).exists():
        raise Http404("No such token.")
    revoked = revoke_token(token_id, actor=request.user.get_username())
    message = "Token revoked." if revoked else "That token was revoked already."

    def refreshed() -> TemplateResponse:
        return render(
            request,
            "ladder/tokens.html",
            tokens_context(TokenForm(), message=message),
            partials=("token-table",),
        )

    return done(request, message, reverse("ladder:tokens"), render_partial=refreshed)
