"""JSON error bodies for the API, mapped once: domain errors become their status with
`{"detail": ...}`, domain validation errors ninja-shaped 422s, a sick database a 503,
and nothing is ever an HTML 500."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import RequestDataTooBig, ValidationError
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema

from omniroute_admin.middleware import too_large

# The two 503s a sick database gets, on every road (the endpoints, the request deadline,
# the pool fast lane): one builder, `unavailable`.
DATABASE_SLOW = "The database did not answer in time; retry shortly."
DATABASE_DOWN = "The database is unavailable; retry shortly."
JSON_CONTENT_TYPE = "application/json; charset=utf-8"


def unavailable_body(detail: str) -> bytes:
    """The body of the API's 503, as ninja renders `{"detail": ...}`."""
    return json.dumps({"detail": detail}).encode()


def unavailable(detail: str) -> HttpResponse:
    """The API's JSON 503 with `Retry-After: 1`: the one builder every road uses (the
    fast lane sends the same status, content type, headers and body)."""
    response = HttpResponse(unavailable_body(detail), status=503, content_type=JSON_CONTENT_TYPE)
    response["Retry-After"] = "1"
    return response


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


def validation_error_body(
    error: ValidationError, *, locations: Mapping[str, list[str]] | None = None
) -> dict[str, object]:
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
    return {"detail": details}


class LocatedValidationError(Exception):
    """A domain ValidationError whose fields sit elsewhere in the request body."""

    def __init__(self, error: ValidationError, locations: Mapping[str, list[str]]) -> None:
        super().__init__(str(error))
        self.error = error
        self.locations = locations


@contextmanager
def located(locations: Mapping[str, list[str]]) -> Iterator[None]:
    """Within, a ValidationError answers its fields at `locations` in the body."""
    try:
        yield
    except ValidationError as error:
        raise LocatedValidationError(error, locations) from error


def install_handlers(
    api: NinjaAPI,
    statuses: Mapping[type[Exception], int] | None = None,
    field_errors: Mapping[type[Exception], str] | None = None,
) -> None:
    """The one place an exception becomes a status: each of `statuses` answers its code
    with `{"detail": str(error)}`; a domain ValidationError, and each of `field_errors`
    (an exception about one body field), ninja's 422 list; database trouble a 503; any
    other surprise a JSON 500 (logged)."""

    statuses = statuses or {}
    field_errors = field_errors or {}

    def answers(status: int) -> Callable[[HttpRequest, Any], HttpResponse]:
        def domain_error(request: HttpRequest, exc: Any) -> HttpResponse:
            return api.create_response(request, {"detail": str(exc)}, status=status)

        return domain_error

    def invalid(request: HttpRequest, exc: Any) -> HttpResponse:
        if isinstance(exc, LocatedValidationError):
            body = validation_error_body(exc.error, locations=exc.locations)
        elif isinstance(exc, ValidationError):
            body = validation_error_body(exc)
        else:
            field = next(field_errors[k] for k in type(exc).__mro__ if k in field_errors)
            body = validation_error_body(ValidationError({field: [str(exc)]}))
        return api.create_response(request, body, status=422)

    def database_unavailable(request: HttpRequest, exc: Any) -> HttpResponse:
        logger.warning(
            "database unavailable during %s %s: %s",
            request.method,
            request.path,
            type(exc).__name__,
        )
        return unavailable(DATABASE_DOWN)

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

    for kind, status in statuses.items():
        api.add_exception_handler(kind, answers(status))
    for kind in (ValidationError, LocatedValidationError, *field_errors):
        api.add_exception_handler(kind, invalid)
    api.add_exception_handler(RequestDataTooBig, body_too_large)
    api.add_exception_handler(OperationalError, database_unavailable)
    api.add_exception_handler(InterfaceError, database_unavailable)
    api.add_exception_handler(Exception, unexpected)
