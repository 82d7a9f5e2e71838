"""The overview page: the ladder at a glance."""

from __future__ import annotations

from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from ladder import beat, services
from ladder.core import SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID
from ladder.web.presenters import (
    beat_banner,
    budget_lines,
    duration_text,
    freshness,
    rung_summaries,
)
from omniroute_admin import dashboard
from omniroute_admin.dashboard import HtmxHttpRequest, render, viewer_required


@require_GET
@viewer_required
def overview(request: HtmxHttpRequest) -> TemplateResponse:
    """The ladder at a glance: rungs, spend, reading freshness and the next reset."""
    now = dashboard.current_time()
    config = services.load_config()
    subscription = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=now)
    thrifty = services.decide_registered(THRIFTY_AUTO_ID, now=now)
    spend = services.spend_summary(now=now)
    health = services.reading_health(now=now)
    subscription_connections = {c for e in subscription.candidates for c in e.connection_ids}
    context = {
        "now": now,
        "rungs": rung_summaries(thrifty, spend),
        "subscription": subscription,
        "subscription_connections": len(subscription_connections),
        "thrifty": thrifty,
        "spend": spend,
        "budgets": budget_lines(spend),
        "freshness": freshness(health, config, now),
        "beat": beat_banner(beat.current_health(now)),
        "config": config,
        "next_change_in": duration_text((thrifty.next_change_at - now).total_seconds())
        if thrifty.next_change_at
        else None,
    }
    return render(request, "ladder/overview.html", context, partials=("ladder-status",))
