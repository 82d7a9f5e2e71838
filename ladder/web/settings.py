"""The settings page: the ladder's tuning, the band drawing and the budgets."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from ladder import services
from ladder.forms import SettingsForm
from ladder.web.charts import band_drawing
from ladder.web.presenters import budget_lines
from omniroute_admin import dashboard
from omniroute_admin.dashboard import (
    HtmxHttpRequest,
    done,
    operator_required,
    render,
    viewer_required,
)


def settings_context(form: SettingsForm, now: datetime) -> dict[str, Any]:
    """The form, the band of the saved settings and the spend against the budgets."""
    row = services.get_settings_row()
    spend = services.spend_summary(now=now)
    _, out_of_range = services.effective_settings_of(row)
    return {
        "form": form,
        "row": row,
        "out_of_range": out_of_range,
        "band": band_drawing(row.exit_cutoff_percent, row.reentry_min_remaining_percent),
        "budgets": budget_lines(spend),
        "spend": spend,
        "now": now,
    }


def _settings_initial() -> dict[str, Any]:
    # The values the ladder applies: a stored field outside the rules shows its nearest
    # legal value, so saving the form as shown stores a legal row.
    initial, _ = services.effective_settings_of(services.get_settings_row())
    # Decimals as typed ("5", "0.15"), not as stored ("5.000000").
    return {
        name: format(value.normalize(), "f") if isinstance(value, Decimal) else value
        for name, value in initial.items()
    }


@require_GET
@viewer_required
def settings_page(request: HtmxHttpRequest) -> TemplateResponse:
    """The ladder's tuning (no enabled flag, deliberately), the band and the budgets."""
    form = SettingsForm(initial=_settings_initial())
    return render(
        request,
        "ladder/settings.html",
        settings_context(form, dashboard.current_time()),
        partials=("settings-form",),
    )


@require_POST
@operator_required
def settings_update(request: HtmxHttpRequest) -> HttpResponseBase:
    """Replace every tuning field at once (audited); field errors come back with a 422."""
    form = SettingsForm(request.POST)
    if form.is_valid():
        try:
            services.update_settings(form.cleaned_data, actor=request.user.get_username())
        except ValidationError as error:
            form.add_error(None, error)
    if not form.is_valid():
        return render(
            request,
            "ladder/settings.html",
            settings_context(form, dashboard.current_time()),
            partials=("settings-form",),
            status=422,
        )

    def saved() -> TemplateResponse:
        context = settings_context(
            SettingsForm(initial=_settings_initial()), dashboard.current_time()
        )
        context["saved"] = True
        return render(request, "ladder/settings.html", context, partials=("settings-form",))

    return done(request, "Settings saved.", reverse("ladder:settings"), render_partial=saved)
