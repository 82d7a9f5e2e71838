"""JSON error bodies for the API: domain validation errors become ninja-shaped 422s,
a sick database a 503, and nothing is ever an HTML 500."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import RequestDataTooBig, ValidationError
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema, Status

from omniroute_admin.middleware import too_large

logger = logging.getLogger(__name__)


class ErrorOut(Schema):
    detail: str


# Responses that the OpenAPI document lists beside each operation's own: ninja answers
# 401 and 403 before the view runs (the scope is checked before the body is validated),
# a malformed JSON body is a 400, a failed validation a 422, a sick database a 503.
GATEWAY_ERRORS: dict[int, Any] = {401: ErrorOut, 503: ErrorOut}
OPERATOR_ERRORS: dict[int, Any] = {**GATEWAY_ERRORS, 403: ErrorOut}
BODY_ERRORS: dict[int, Any] = {400: ErrorOut, 422: dict}
PATH_ERRORS: dict[int, Any] = {422: dict}


def validation_error_response(
    error: ValidationError, *, locations: Mapping[str, list[str]] | None = None
) -> Status[dict[str, object]]:
    """A domain ValidationError as ninja's 422 body: a list of {loc, msg, type};
    `locations` maps a service's field name to its place in the body, when they differ."""
    details: list[dict[str, object]] = []
    if hasattr(error, "error_dict"):
        for field, messages in error.message_dict.items():
            loc = ["body", "payload", *(locations or {}).get(field, [field])]
            details.extend(
                {"loc": loc, "msg": message, "type": "value_error"} for message in messages
            )
    else:
        details.extend(
            {"loc": ["body", "payload"], "msg": message, "type": "value_error"}
            for message in error.messages
        )
    return Status(422, {"detail": details})


def install_handlers(api: NinjaAPI) -> None:
    """Database trouble answers 503 JSON; any other surprise a JSON 500 (logged)."""

    def database_unavailable(request: HttpRequest, exc: Any) -> HttpResponse:
        logger.warning(
            "database unavailable during %s %s: %s",
            request.method,
            request.path,
            type(exc).__name__,
        )
        response = api.create_response(
            request, {"detail": "The database is unavailable; retry shortly."}, status=503
        )
        response["Retry-After"] = "1"
        return response

    def unexpected(request: HttpRequest, exc: Any) -> HttpResponse:
        logger.error(
            "unexpected %s during %s %s",
            type(exc).__name__,
            request.method,
            request.path,
            exc_info=exc,
        )
        return api.create_response(request, {"detail": "Internal error."}, status=500)

    def body_too_large(request: HttpRequest, exc: Any) -> HttpResponse:
        return too_large(request)

    api.add_exception_handler(RequestDataTooBig, body_too_large)
    api.add_exception_handler(OperationalError, database_unavailable)
    api.add_exception_handler(InterfaceError, database_unavailable)
    api.add_exception_handler(Exception, unexpected)
