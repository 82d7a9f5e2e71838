"""Dashboard views."""

from __future__ import annotations

from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from billing.models import BillingCatalogEntry


@require_GET
def overview(request: HttpRequest) -> TemplateResponse:
    """The landing page: the curated catalog and where to go next."""
    entries = BillingCatalogEntry.objects.all()
    return TemplateResponse(request, "ladder/overview.html", {"entries": entries})
