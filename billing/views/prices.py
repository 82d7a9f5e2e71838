"""The model prices' page: pages of prices, save, delete, confirm free, and the price
file upload."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from billing import services
from billing.forms import PriceFileForm, PriceForm
from billing.models import ModelPrice
from billing.price_import import PriceFileError
from billing.views import EDIT_IDS, NEW_IDS, error_notice
from ladder.services import load_config
from omniroute_admin.dashboard import (
    HtmxHttpRequest,
    done,
    int_param,
    operator_required,
    render,
    search_param,
    viewer_required,
)

PRICES_TEMPLATE = "billing/prices.html"
PRICES_PER_PAGE = 100


@dataclass(frozen=True, slots=True)
class PriceRowView:
    price: ModelPrice
    tier: str


def prices_context(
    request: HttpRequest,
    *,
    form: PriceForm | None = None,
    editing: int | None = None,
    deleting: int | None = None,
    notice: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One page of prices with their computed tier: settings, wildcard rows, the page
    and the counts (matching, awaiting review), four queries whatever the catalog size.
    Pages are keyset (`?after=` / `?before=` a row's cursor), so the last of 50,000 rows
    costs what the first does. `?review=1` lists only the rows that need review."""
    query = search_param(request)
    review_only = request.GET.get("review") == "1"
    position = {}
    for name in ("after", "before"):
        try:
            position[name] = services.decode_price_cursor(request.GET.get(name))
        except ValueError:  # a stale or hand-made link: start from the first page
            position[name] = None
    if position["after"] is not None:
        position["before"] = None
    config = load_config()
    page = services.price_page(
        limit=PRICES_PER_PAGE,
        after=position["after"],
        before=position["before"],
        query=query or None,
        needs_review=True if review_only else None,
        cheap_max_input_usd_per_mtok=config.cheap_max_input_usd_per_mtok,
    )
    # Both counts in one scan: the rows this page's filters match, and every row
    # awaiting review (the filter link's figure).
    matching = Q()
    if query:
        matching &= Q(provider__icontains=query) | Q(model__icontains=query)
    if review_only:
        matching &= Q(needs_review=True)
    counts = ModelPrice.objects.aggregate(
        matching=Count("pk", filter=matching), review=Count("pk", filter=Q(needs_review=True))
    )
    rows = page.rows
    views = [
        PriceRowView(
            price,
            page.book.tier_of(
                price.provider, price.model, config.cheap_max_input_usd_per_mtok
            ).value,
        )
        for price in rows
    ]
    if editing is not None and form is None:
        price: ModelPrice | None = next((row for row in rows if row.pk == editing), None)
        if price is None:
            price = ModelPrice.objects.filter(pk=editing).first()
        if price is None:
            editing = None
        else:
            form = PriceForm(
                auto_id=EDIT_IDS,
                initial={
                    "provider": price.provider,
                    "model": price.model,
                    "input_usd_per_mtok": price.input_usd_per_mtok,
                    "output_usd_per_mtok": price.output_usd_per_mtok,
                    "tier_override": price.tier_override or "",
                },
            )
    params = {"q": query} if query else {}
    if review_only:
        params["review"] = "1"
    # The page's own position, so an edit or a delete comes back to the same page.
    here = {name: request.GET[name] for name in ("after", "before") if position[name] is not None}
    return {
        "rows": views,
        "count": counts["matching"],
        "next_params": urlencode({**params, "after": page.next_cursor}) if page.next_cursor else "",
        "previous_params": urlencode({**params, "before": page.previous_cursor})
        if page.previous_cursor
        else "",
        "query": query,
        "review_only": review_only,
        "review_count": counts["review"],
        "query_string": urlencode({**params, **here}),
        "search_params": urlencode(params),
        "editing": editing,
        "deleting": deleting,
        "edit_form": form if editing is not None else None,
        "create_form": form if editing is None and form is not None else PriceForm(auto_id=NEW_IDS),
        "file_form": PriceFileForm(),
        "config": config,
        "notice": notice,
    }


def _prices(request: HtmxHttpRequest, status: int = 200, **context: Any) -> TemplateResponse:
    return render(
        request,
        PRICES_TEMPLATE,
        prices_context(request, **context),
        partials=("price-table", "price-import"),
        status=status,
    )


@require_GET
@viewer_required
def prices(request: HtmxHttpRequest) -> TemplateResponse:
    """Model prices with their computed tier; `?q=` searches, `?edit=<id>` opens a row,
    `?delete=<id>` asks to confirm."""
    return _prices(
        request, editing=int_param(request, "edit"), deleting=int_param(request, "delete")
    )


@require_POST
@operator_required
def price_save(request: HtmxHttpRequest) -> HttpResponseBase:
    """Create or update the price of (provider, model), audited."""
    editing = int_param(request, "edit")
    form = PriceForm(request.POST, auto_id=NEW_IDS if editing is None else EDIT_IDS)
    if not form.is_valid():
        return _prices(request, 422, form=form, editing=editing)
    try:
        price, created = services.upsert_price(
            form.price_input(), actor=request.user.get_username()
        )
    except ValidationError as error:
        form.add_error(None, error)
        return _prices(request, 422, form=form, editing=editing)
    message = f"{'Added' if created else 'Saved'} {price.provider}/{price.model}."
    return done(
        request,
        message,
        reverse("billing:prices") + "?" + urlencode({"q": price.model}),
        render_partial=lambda: _prices(request, notice={"level": "success", "message": message}),
    )


@require_POST
@operator_required
def price_delete(request: HtmxHttpRequest, price_id: int) -> HttpResponseBase:
    """Delete a price row (audited) after the confirmation step."""
    try:
        services.delete_price(price_id, actor=request.user.get_username())
    except ModelPrice.DoesNotExist:
        return _prices(request, 404, notice=error_notice("That price was deleted already."))
    message = "Price deleted: the model is priced by its provider's * row, or assumed premium."
    return done(
        request,
        message,
        reverse("billing:prices"),
        render_partial=lambda: _prices(request, notice={"level": "success", "message": message}),
    )


@require_POST
@operator_required
def price_confirm_free(request: HtmxHttpRequest, price_id: int) -> HttpResponseBase:
    """Confirm that a price awaiting review is free (a `free` override; audited)."""
    try:
        price = services.confirm_free(price_id, actor=request.user.get_username())
    except ModelPrice.DoesNotExist:
        return _prices(request, 404, notice=error_notice("That price was deleted meanwhile."))
    message = f"Confirmed {price.provider}/{price.model} as free."
    return done(
        request,
        message,
        reverse("billing:prices") + "?" + urlencode({"review": "1"}),
        render_partial=lambda: _prices(request, notice={"level": "success", "message": message}),
    )


@require_POST
@operator_required
def price_import(request: HtmxHttpRequest) -> HttpResponseBase:
    """Import a price file in one transaction. Malformed rows are skipped and counted,
    imported zeros flagged for review; a file that cannot be read changes nothing."""
    form = PriceFileForm(request.POST, request.FILES)
    error: str | None = None
    counts: services.ImportCounts | None = None
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            counts = services.import_price_file(
                upload.read(), form.cleaned_data["provider_map"], actor=request.user.get_username()
            )
        except PriceFileError as problem:
            error = f"{upload.name}: {problem} Nothing was imported."
    if counts is None:
        context = prices_context(request)
        context.update(file_form=form, import_error=error)
        return render(
            request, PRICES_TEMPLATE, context, partials=("price-import", "price-table"), status=422
        )
    message = f"Imported: {counts.summary()}."
    if not request.htmx:
        return done(
            request, message, reverse("billing:prices"), render_partial=lambda: _prices(request)
        )
    context = prices_context(request)
    context.update(counts=counts)
    response = render(request, PRICES_TEMPLATE, context, partials=("price-import",))
    # The price table listens for this and reloads itself.
    response.headers["HX-Trigger"] = "prices-changed"
    return response
