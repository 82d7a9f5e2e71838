"""The notifications page: webhooks (create, edit, delete, test, rotate the secret) and
the delivery log."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import patch_cache_control
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_POST

from billing import services as billing_services
from ladder.core.notifications import SUBSCRIBABLE_KINDS, Kind
from ladder.crypto import CredentialKeyMissing
from ladder.forms import WebhookEditForm, WebhookForm
from ladder.models import Webhook
from ladder.services import webhooks
from ladder.web.presenters import WebhookRow, duration_text
from omniroute_admin.dashboard import (
    HtmxHttpRequest,
    done,
    int_param,
    operator_required,
    render,
    viewer_required,
)

NOTIFICATIONS_TEMPLATE = "ladder/notifications.html"
NOTIFICATION_PARTIALS = ("webhook-table", "delivery-log")
DELIVERIES_PER_PAGE = 50
# A write that changes the log tells the page's delivery log to refresh at once.
DELIVERIES_EVENT = "deliveries-changed"
KIND_HEADLINES = {kind.value: kind.headline for kind in Kind}
NO_SECRET_KEY = (
    "No credential key is configured (OMNIROUTE_CREDENTIAL_KEY): webhook secrets cannot be "
    "stored, so nothing was saved."
)
# The webhook form's ids, apart from the create form's on the same page.
WEBHOOK_EDIT_IDS = "edit-%s"
WEBHOOK_NEW_IDS = "new-%s"


def notifications_context(
    request: HttpRequest,
    *,
    editing: int | None = None,
    edit_form: WebhookEditForm | None = None,
    deleting: int | None = None,
    rotating: int | None = None,
    create_form: WebhookForm | None = None,
    notice: dict[str, str] | None = None,
    secret_for: Webhook | None = None,
    secret: str | None = None,
) -> dict[str, Any]:
    """Webhooks and one page of the delivery log (four queries however long the log)."""
    rows = [
        WebhookRow(
            webhook,
            webhooks.target_label(webhook.url),
            [KIND_HEADLINES.get(kind, kind) for kind in webhook.kinds],
        )
        for webhook in webhooks.webhooks()
    ]
    if editing is not None and edit_form is None:
        found = next((row.webhook for row in rows if row.webhook.pk == editing), None)
        if found is None:
            editing = None
            notice = notice or {"level": "error", "message": "That webhook no longer exists."}
        else:
            edit_form = WebhookEditForm(
                auto_id=WEBHOOK_EDIT_IDS,
                initial={
                    "name": found.name,
                    "format": found.format,
                    "kinds": list(found.kinds),
                    "is_active": found.is_active,
                },
            )
    page = Paginator(webhooks.delivery_log(), DELIVERIES_PER_PAGE).get_page(request.GET.get("page"))
    return {
        "rows": rows,
        "editing": editing,
        "edit_form": edit_form,
        "deleting": deleting,
        "rotating": rotating,
        "create_form": create_form
        or WebhookForm(
            auto_id=WEBHOOK_NEW_IDS,
            initial={"is_active": True, "kinds": [k.value for k in SUBSCRIBABLE_KINDS]},
        ),
        "notice": notice,
        "secret_for": secret_for,
        "secret": secret,
        "page": page,
        "deliveries": [(d, KIND_HEADLINES.get(d.kind, d.kind)) for d in page.object_list],
        "allow_private": settings.NOTIFY_ALLOW_PRIVATE_TARGETS,
        "max_attempts": settings.NOTIFY_MAX_ATTEMPTS,
        "empty_after": duration_text(settings.NOTIFY_SUBSCRIPTION_EMPTY_SECONDS),
    }


def _notifications(request: HtmxHttpRequest, status: int = 200, **context: Any) -> TemplateResponse:
    return render(
        request,
        NOTIFICATIONS_TEMPLATE,
        notifications_context(request, **context),
        partials=NOTIFICATION_PARTIALS,
        status=status,
    )


@require_GET
@viewer_required
def notifications_page(request: HtmxHttpRequest) -> TemplateResponse:
    """Webhooks and the delivery log; `?edit=`, `?delete=` and `?rotate=<id>` open a
    webhook's form or confirmation, `?page=` pages the log."""
    return _notifications(
        request,
        editing=int_param(request, "edit"),
        deleting=int_param(request, "delete"),
        rotating=int_param(request, "rotate"),
    )


def _secret_shown_once(
    request: HtmxHttpRequest, webhook: Webhook, secret: str, message: str
) -> TemplateResponse:
    """The page with a new secret, this once; no cache may keep the response."""
    response = _notifications(
        request,
        status=201 if request.htmx else 200,
        notice={"level": "success", "message": message},
        secret_for=webhook,
        secret=secret,
    )
    patch_cache_control(response, no_store=True, private=True)
    return response


def _success(request: HtmxHttpRequest, message: str) -> HttpResponseBase:
    def refreshed() -> TemplateResponse:
        response = _notifications(request, notice={"level": "success", "message": message})
        response["HX-Trigger"] = DELIVERIES_EVENT
        return response

    return done(request, message, reverse("ladder:notifications"), render_partial=refreshed)


def _webhook_errors(form: WebhookForm, error: Exception) -> None:
    if isinstance(error, ValidationError):
        form.add_error(None, error)
    else:  # CredentialKeyMissing: raised before anything is written
        form.add_error("secret", NO_SECRET_KEY)


@sensitive_post_parameters("secret")
@require_POST
@operator_required
def webhook_create(request: HtmxHttpRequest) -> HttpResponseBase:
    """Create a webhook (audited); a generated secret is shown in this response alone."""
    form = WebhookForm(request.POST, auto_id=WEBHOOK_NEW_IDS)
    if form.is_valid():
        try:
            webhook, secret = webhooks.create_webhook(
                form.webhook_input(), actor=request.user.get_username()
            )
        except (ValidationError, CredentialKeyMissing) as error:
            _webhook_errors(form, error)
        except billing_services.Conflict as error:
            return _notifications(
                request, 409, create_form=form, notice={"level": "error", "message": str(error)}
            )
    if not form.is_valid():
        return _notifications(request, 422, create_form=form)
    message = f"Created webhook {webhook.name}."
    if secret is not None:
        return _secret_shown_once(request, webhook, secret, message)
    return _success(request, message)


@sensitive_post_parameters("secret")
@require_POST
@operator_required
def webhook_update(request: HtmxHttpRequest, webhook_id: int) -> HttpResponseBase:
    """Save a webhook's settings (audited); an empty URL or secret keeps the stored one."""
    form = WebhookEditForm(request.POST, auto_id=WEBHOOK_EDIT_IDS)
    if form.is_valid():
        try:
            webhook = webhooks.update_webhook(
                webhook_id, form.webhook_input(), actor=request.user.get_username()
            )
        except webhooks.NotFound:
            return _notifications(
                request,
                404,
                notice={"level": "error", "message": "That webhook was deleted; nothing saved."},
            )
        except (ValidationError, CredentialKeyMissing) as error:
            _webhook_errors(form, error)
        except billing_services.Conflict as error:
            return _notifications(
                request,
                409,
                editing=webhook_id,
                edit_form=form,
                notice={"level": "error", "message": str(error)},
            )
    if not form.is_valid():
        return _notifications(request, 422, editing=webhook_id, edit_form=form)
    return _success(request, f"Saved webhook {webhook.name}.")


@require_POST
@operator_required
def webhook_delete(request: HtmxHttpRequest, webhook_id: int) -> HttpResponseBase:
    """Delete a webhook (audited) after the confirmation step; its log rows stay."""
    try:
        webhook = webhooks.delete_webhook(webhook_id, actor=request.user.get_username())
    except webhooks.NotFound:
        return _notifications(
            request, 404, notice={"level": "error", "message": "That webhook was deleted already."}
        )
    return _success(request, f"Deleted webhook {webhook.name}.")


@require_POST
@operator_required
def webhook_test(request: HtmxHttpRequest, webhook_id: int) -> HttpResponseBase:
    """Queue a test notification to the webhook (audited); the log shows how it went."""
    try:
        webhooks.send_test(webhook_id, actor=request.user.get_username())
    except webhooks.NotFound:
        return _notifications(
            request, 404, notice={"level": "error", "message": "That webhook no longer exists."}
        )
    return _success(request, "Test notification queued: the delivery log shows how it goes.")


@require_POST
@operator_required
def webhook_rotate_secret(request: HtmxHttpRequest, webhook_id: int) -> HttpResponseBase:
    """Replace the webhook's secret with a new random one, shown in this response alone."""
    try:
        webhook, secret = webhooks.rotate_webhook_secret(
            webhook_id, actor=request.user.get_username()
        )
    except webhooks.NotFound:
        return _notifications(
            request, 404, notice={"level": "error", "message": "That webhook no longer exists."}
        )
    except CredentialKeyMissing:
        return _notifications(request, 503, notice={"level": "error", "message": NO_SECRET_KEY})
    message = f"New secret for {webhook.name}: receivers need it from now on."
    return _secret_shown_once(request, webhook, secret, message)
