"""The pools page: every published auto id's pool, grouped by rung."""

from __future__ import annotations

from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from ladder import services
from ladder.core import parse_auto_id
from ladder.web.presenters import PoolTab, pool_view
from omniroute_admin import dashboard
from omniroute_admin.dashboard import HtmxHttpRequest, render, viewer_required


@require_GET
@viewer_required
def pools(request: HtmxHttpRequest) -> TemplateResponse:
    """Every published auto id's pool, ordered and grouped by rung, with each excluded
    connection and why; one selected in full."""
    now = dashboard.current_time()
    decisions = services.decide_published(now=now)
    by_id = {decision.auto_id.auto_id: decision for decision in decisions}
    wanted = request.GET.get("auto_id", "")
    notice = None
    if wanted and wanted not in by_id:
        try:
            parse_auto_id(wanted)
            notice = f"{wanted} is not published: no registered candidate lists its category."
        except ValueError as error:
            notice = str(error)
    selected = by_id.get(wanted) or decisions[0]
    tabs = [
        PoolTab(
            decision.auto_id.auto_id,
            len(decision.candidates),
            len(decision.excluded),
            decision is selected,
        )
        for decision in decisions
    ]
    context = {
        "now": now,
        "tabs": tabs,
        "pool": pool_view(selected, now),
        "notice": notice,
        "selected_query": urlencode({"auto_id": selected.auto_id.auto_id}),
        "pools_url": reverse("ladder:pools"),
        "connection_base": reverse("ladder:connections"),
    }
    return render(request, "ladder/pools.html", context, partials=("pool-table",))
