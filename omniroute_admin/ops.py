"""Operations endpoints (no auth): liveness, readiness and Prometheus metrics, plus the
OpenAI-style `/v1/models` alias that gateways expect at that well-known path."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from datetime import datetime

from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ladder import beat
from ladder.api.models_list import models_list
from ladder.metrics import REGISTRY
from ladder.models import ApiToken
from ladder.services.enqueue import broker_problem
from ladder.tokens import authenticate

logger = logging.getLogger(__name__)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is alive (touches nothing else)."""
    return JsonResponse({"status": "ok"})


def _database_problem() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as error:  # any failure means "not ready", never a 500
        return type(error).__name__
    return None


def _broker_problem() -> str | None:
    return broker_problem()


def current_time() -> datetime:
    """The clock of /readyz (tests replace it to pin `now`)."""
    return timezone.now()


def _heartbeat_problems(broker_down: bool) -> dict[str, str]:
    """{"beat": why} or {"worker": why} while the heartbeat is late (ladder/beat.py)."""
    now = current_time()
    try:
        last_run_at, sent_at = beat.heartbeat_times()
    except Exception as error:  # the database went away between the two checks
        return {"beat": type(error).__name__}
    return beat.silent_part(beat.judge(last_run_at, now), sent_at, now=now, broker_down=broker_down)


def _problems() -> dict[str, str | None]:
    return {"database": _database_problem(), "broker": _broker_problem()}


class ReadinessCollector(Collector):
    """What /readyz checks, as a gauge per dependency (never raises)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily(
            "omniroute_dependency_up",
            "1 when the dependency answers as /readyz checks it, else 0 (database, broker). "
            "A database outage fails the whole scrape with a 503, so alert on `up` as well.",
            labels=["dependency"],
        )
        for name, problem in _problems().items():
            up.add_metric([name], 0.0 if problem else 1.0)
        yield up


REGISTRY.register(ReadinessCollector())


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer and the beat's heartbeat is fresh;
    503 naming what is down: database, broker, beat or worker (ladder/beat.py tells the
    last two apart)."""
    database = _database_problem()
    broker = _broker_problem()
    checks = [("database", database), ("broker", broker)]
    problems = {name: problem for name, problem in checks if problem is not None}
    if database is None:  # the heartbeat lives in the database
        problems.update(_heartbeat_problems(broker_down=broker is not None))
    if problems:
        return JsonResponse({"status": "unavailable", "down": problems}, status=503)
    return JsonResponse({"status": "ok"})


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition."""
    try:
        body = generate_latest(REGISTRY)
    except Exception as error:  # a sick database must not turn a scrape into a 500 page
        logger.warning("metrics collection failed: %s", type(error).__name__)
        return HttpResponse(
            f"# metrics unavailable: {type(error).__name__}\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


@require_GET
def v1_models(request: HttpRequest) -> JsonResponse:
    """Alias of /api/v1/models with the same bearer-token auth."""
    header = request.headers.get("Authorization", "")
    scheme, _, secret = header.partition(" ")
    token = authenticate(secret.strip()) if scheme.lower() == "bearer" else None
    if token is None or not token.allows(ApiToken.Scope.GATEWAY):
        return JsonResponse({"detail": "Unauthorized"}, status=401)
    return JsonResponse(models_list())


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """400 for a request refused before any view (a Host not allowed, a suspicious
    request): JSON `{"detail": ...}` under the API, Django's page elsewhere. The detail
    names no header value: what was refused is the client's own input."""
    from django.views.defaults import bad_request as django_bad_request

    from omniroute_admin.middleware import is_api_path

    if is_api_path(request.path):
        return JsonResponse({"detail": "Bad Request"}, status=400)
    return django_bad_request(request, exception or Exception("Bad Request"))


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 for unmatched URLs: JSON under the API, Django's page elsewhere."""
    from django.views.defaults import page_not_found

    from omniroute_admin.middleware import is_api_path

    if is_api_path(request.path):
        return JsonResponse({"detail": "Not Found"}, status=404)
    return page_not_found(request, exception or Exception("Not Found"))


def server_error(request: HttpRequest) -> HttpResponse:
    """500: JSON under the API (never an HTML page to a gateway), Django's page elsewhere.
    A database error (raised where the deadline middleware's process_exception does not
    see it: in a middleware, such as the session lookup) is the 503 of an unavailable
    database instead."""
    from django.views.defaults import server_error as django_server_error

    from omniroute_admin.dashboard import page_unavailable
    from omniroute_admin.errors import DATABASE_DOWN, unavailable
    from omniroute_admin.middleware import is_api_path

    # Django calls this handler while it handles the exception.
    is_database_error = isinstance(sys.exc_info()[1], (OperationalError, InterfaceError))
    if is_api_path(request.path):
        if is_database_error:
            return unavailable(DATABASE_DOWN)  # the API's one 503
        return JsonResponse({"detail": "Internal error."}, status=500)
    if is_database_error:
        return page_unavailable(request, answered=True)
    return django_server_error(request)
