"""The overview page: the ladder at a glance."""

from __future__ import annotations

from decimal import Decimal

from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from ladder import services
from ladder.core import SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID, Rung
from ladder.core.prose import money_text
from ladder.web.outage import outage
from ladder.web.overview_facts import distinct_connections, next_change, rung_summaries
from ladder.web.presenters import budget_lines, freshness
from omniroute_admin import dashboard
from omniroute_admin.dashboard import HtmxHttpRequest, render, viewer_required


@require_GET
@viewer_required
def overview(request: HtmxHttpRequest) -> TemplateResponse:
    """The ladder at a glance: paid, saved and what happens next, rungs, spend, reading
    freshness and the next reset."""
    now = dashboard.current_time()
    config = services.load_config()
    subscription = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=now)
    thrifty = services.decide_registered(THRIFTY_AUTO_ID, now=now)
    spend = services.spend_summary(now=now)
    health = services.reading_health(now=now)
    fresh = freshness(health, config, now)
    forecasts = services.plan_forecasts(
        now=now,
        config=config,
        window_spent={
            Rung.from_label(label): budget.spent_usd for label, budget in spend.rungs.items()
        },
    )
    context = {
        "now": now,
        "rungs": rung_summaries(thrifty, spend),
        "subscription": subscription,
        "subscription_connections": distinct_connections(subscription),
        "thrifty_connections": distinct_connections(thrifty),
        "thrifty": thrifty,
        "spend": spend,
        "budgets": budget_lines(spend),
        "paid_usd": money_text(sum((r.spent_usd for r in spend.rungs.values()), Decimal(0))),
        "saved_usd": money_text(spend.saved_usd),
        "freshness": fresh,
        "outage": outage(now, subscription),
        "config": config,
        "next_change": next_change(subscription, thrifty, fresh),
        "connections_url": reverse("ladder:connections"),
        # What happens next (ladder/core/forecast.py): those with a run-out instant lead.
        "forecasts": [f for f in forecasts if f.forecast.runs_out_at is not None],
        "unforecast_count": sum(1 for f in forecasts if f.forecast.runs_out_at is None),
    }
    return render(request, "ladder/overview.html", context, partials=("ladder-status",))
