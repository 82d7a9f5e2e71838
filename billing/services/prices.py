"""Prices: pages, the price book, writes, confirm free and the price-file import."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Case, CharField, F, Q, Value, When
from django.utils import timezone

from billing.bounds import OutOfRange, bounds_of, fit_decimal, text_problem
from billing.classify import normalise_provider
from billing.keyset import REFUSED, decode_position, encode_position
from billing.models import (
    MODEL_MAX_LENGTH,
    PROVIDER_MAX_LENGTH,
    AuditEntry,
    ChangeCounter,
    ModelPrice,
    ProviderAlias,
)
from billing.price_import import (
    ParsedPriceFile,
    PriceLimits,
    decode_price_file,
    parse_price_file,
)
from billing.services.aliases import load_aliases
from billing.services.audit import price_snapshot, record_audit
from billing.services.common import PriceNotFound, _clean_text
from billing.services.counters import bump
from billing.tiers import (
    ASSUMED_INPUT_USD_PER_MTOK,
    WILDCARD_MODEL,
    PriceBook,
    PriceRow,
    Tier,
    tier_for_input_price,
)


def _locked_price(price_id: int) -> ModelPrice:
    price = ModelPrice.objects.select_for_update().filter(pk=price_id).first()
    if price is None:
        raise PriceNotFound(f"No price {price_id}.")
    return price


@dataclass(frozen=True, slots=True)
class PriceInput:
    provider: str
    model: str
    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    tier_override: str | None


@dataclass(frozen=True, slots=True)
class ImportCounts:
    created: int
    updated: int
    unchanged: int
    skipped: int  # not chat models, or no price
    invalid: int = 0  # malformed or out of range: skipped, never stored
    needs_review: int = 0  # the file's rows stored as needing review (imported zeros)

    def summary(self) -> str:
        """One line for the command's output and the dashboard's message."""
        return (
            f"created {self.created}, updated {self.updated}, unchanged {self.unchanged}, "
            f"skipped {self.skipped}, invalid {self.invalid}, need review {self.needs_review}"
        )


# --- one page of prices (the API's keyset pagination) -----------------------------------


@dataclass(frozen=True, slots=True)
class PricePage:
    rows: list[ModelPrice]
    book: PriceBook  # the page's rows and their providers' `*` rows: enough for each tier
    next_cursor: str | None
    previous_cursor: str | None = None  # set when the page was asked for `before` a row


def encode_price_cursor(price: ModelPrice) -> str:
    """An opaque cursor: the (provider, model) position after which the next page starts."""
    return encode_position(price.provider, price.model)


def decode_price_cursor(cursor: str | None) -> tuple[str, str] | None:
    """The position a cursor names, or ValueError when this API did not give it out."""
    if cursor is None:
        return None
    provider, model = decode_position(cursor, str, str)
    if (
        text_problem(provider, PROVIDER_MAX_LENGTH) is not None
        or text_problem(model, MODEL_MAX_LENGTH) is not None
    ):
        raise ValueError(REFUSED)
    return provider, model


def tier_expression(
    cheap_max_input_usd_per_mtok: Decimal, wildcard_overrides: dict[str, str]
) -> Case:
    """A row's tier in SQL, for filtering by it: exactly `PriceBook.tier_of` for a row
    that exists (its override, its provider's `*` override, else its price; a row
    awaiting review is priced as unpriced). The `*` overrides come in as plain values
    (one row per provider at most), so the expression is per row: no subquery."""
    assumed = tier_for_input_price(ASSUMED_INPUT_USD_PER_MTOK, cheap_max_input_usd_per_mtok)
    by_override: dict[str, list[str]] = {}
    for provider, override in wildcard_overrides.items():
        by_override.setdefault(override, []).append(provider)
    return Case(
        When(Q(tier_override__isnull=False) & ~Q(tier_override=""), then=F("tier_override")),
        *(
            When(provider__in=sorted(providers), then=Value(override))
            for override, providers in sorted(by_override.items())
        ),
        When(needs_review=True, then=Value(assumed.value)),
        When(input_usd_per_mtok__lte=0, then=Value(Tier.FREE.value)),
        When(input_usd_per_mtok__lte=cheap_max_input_usd_per_mtok, then=Value(Tier.CHEAP.value)),
        default=Value(Tier.PREMIUM.value),
        output_field=CharField(),
    )


def price_page(
    *,
    limit: int,
    after: tuple[str, str] | None = None,
    before: tuple[str, str] | None = None,
    provider: str | None = None,
    query: str | None = None,
    tier: str | None = None,
    needs_review: bool | None = None,
    cheap_max_input_usd_per_mtok: Decimal,
) -> PricePage:
    """One page of prices in (provider, model) order after (or before) a position: two
    queries whatever the table's size (the providers' `*` rows, then the page). Keyset,
    not an offset, so the last page costs what the first does."""
    # At most one `*` row per provider: they decide the tiers of the page's rows.
    wildcards = list(ModelPrice.objects.filter(model=WILDCARD_MODEL))
    backwards = before is not None
    prices = ModelPrice.objects.order_by(
        *(("-provider", "-model") if backwards else ("provider", "model"))
    )
    # (provider, model) > (p, m), spelled so the unique index serves it: the redundant
    # `provider >= p` gives the planner a range to start the index scan at.
    if after is not None:
        prices = prices.filter(provider__gte=after[0]).filter(
            Q(provider__gt=after[0]) | Q(provider=after[0], model__gt=after[1])
        )
    if before is not None:
        prices = prices.filter(provider__lte=before[0]).filter(
            Q(provider__lt=before[0]) | Q(provider=before[0], model__lt=before[1])
        )
    if provider is not None:
        # Normalised in the same query: the name itself, or the provider it is an alias of.
        name = provider.strip().lower()
        prices = prices.filter(
            Q(provider=name)
            | Q(provider__in=ProviderAlias.objects.filter(alias=name).values("provider"))
        )
    if query:
        prices = prices.filter(Q(provider__icontains=query) | Q(model__icontains=query))
    if needs_review is not None:
        prices = prices.filter(needs_review=needs_review)
    if tier is not None:
        overrides = {w.provider: w.tier_override for w in wildcards if w.tier_override}
        prices = prices.annotate(
            computed_tier=tier_expression(cheap_max_input_usd_per_mtok, overrides)
        ).filter(computed_tier=tier)
    rows = list(prices[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    if backwards:
        rows.reverse()
    book = PriceBook([row.as_row() for row in rows] + [w.as_row() for w in wildcards])
    # Going backwards, the row the page was asked before follows it; going forwards,
    # rows precede a page asked for after one.
    has_next = bool(rows) and (backwards or more)
    has_previous = bool(rows) and (more if backwards else after is not None)
    return PricePage(
        rows=rows,
        book=book,
        next_cursor=encode_price_cursor(rows[-1]) if has_next else None,
        previous_cursor=encode_price_cursor(rows[0]) if has_previous else None,
    )


def price_book_for(price: ModelPrice) -> PriceBook:
    """Enough of the catalog to tier one row: the row and its provider's `*` row (one
    query, whatever the table's size)."""
    wildcard = ModelPrice.objects.filter(provider=price.provider, model=WILDCARD_MODEL)
    return PriceBook([price.as_row(), *(row.as_row() for row in wildcard)])


# In PlainPriceRow's order (billing.tiers).
_BOOK_FIELDS = (
    "provider",
    "model",
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "tier_override",
    "needs_review",
)


def load_price_book() -> PriceBook:
    """The whole price catalog, indexed for tiers and costs (one query). The query's own
    tuples, no object per row: every config change reloads it on the decision path, and
    at 50,000 rows model instances cost about a second."""
    return PriceBook(ModelPrice.objects.order_by().values_list(*_BOOK_FIELDS))


def price_limits() -> PriceLimits:
    """What the price table stores, from its model fields (for the price-file parser)."""
    return PriceLimits(
        provider_max_length=PROVIDER_MAX_LENGTH,
        model_max_length=MODEL_MAX_LENGTH,
        usd_per_mtok=bounds_of(ModelPrice, "input_usd_per_mtok"),
    )


def clean_price_input(data: PriceInput) -> PriceInput:
    """Normalise and validate a price write; raises ValidationError naming each field."""
    errors: dict[str, list[str]] = {}
    provider = _clean_text(data.provider, "provider", PROVIDER_MAX_LENGTH, errors)
    if provider:
        provider = normalise_provider(provider, load_aliases())
    model = _clean_text(data.model, "model", MODEL_MAX_LENGTH, errors)
    costs: dict[str, Decimal] = {}
    for field in ("input_usd_per_mtok", "output_usd_per_mtok"):
        try:
            costs[field] = fit_decimal(getattr(data, field), bounds_of(ModelPrice, field))
        except OutOfRange as error:
            errors.setdefault(field, []).append(f"{error} (USD per million tokens)")
    if data.tier_override is not None and data.tier_override not in {t.value for t in Tier}:
        errors.setdefault("tier_override", []).append(f"Unknown tier {data.tier_override!r}.")
    if errors:
        raise ValidationError(errors)
    return PriceInput(
        provider,
        model,
        costs["input_usd_per_mtok"],
        costs["output_usd_per_mtok"],
        data.tier_override,
    )


def upsert_price(data: PriceInput, *, actor: str) -> tuple[ModelPrice, bool]:
    """Create or update the price of (provider, model) with its audit row; (price, created).
    A price entered by hand is `manual` and known: even a zero is free, no review needed."""
    data = clean_price_input(data)
    with transaction.atomic():
        price = (
            ModelPrice.objects.select_for_update()
            .filter(provider=data.provider, model=data.model)
            .first()
        )
        before = price_snapshot(price) if price is not None else None
        if price is None:
            price = ModelPrice(provider=data.provider, model=data.model)
        price.input_usd_per_mtok = data.input_usd_per_mtok
        price.output_usd_per_mtok = data.output_usd_per_mtok
        price.tier_override = data.tier_override
        price.source = ModelPrice.Source.MANUAL
        price.needs_review = False
        price.updated_by = actor
        price.save()
        bump(ChangeCounter.CONFIG)
        record_audit(
            target_type="price",
            target_id=price.pk,
            action=AuditEntry.Action.CREATE if before is None else AuditEntry.Action.UPDATE,
            actor=actor,
            before=before,
            after=price_snapshot(price),
        )
    return price, before is None


def delete_price(price_id: int, *, actor: str) -> None:
    """Delete a price row and audit it; DoesNotExist when it is gone already."""
    with transaction.atomic():
        price = _locked_price(price_id)
        before = price_snapshot(price)
        price.delete()
        bump(ChangeCounter.CONFIG)
        record_audit(
            target_type="price",
            target_id=price_id,
            action=AuditEntry.Action.DELETE,
            actor=actor,
            before=before,
            after=None,
        )


def confirm_free(price_id: int, *, actor: str) -> ModelPrice:
    """An operator confirms that a row awaiting review is free: a `free` override, the
    review cleared, audited, the config counter moved. DoesNotExist when it is gone."""
    with transaction.atomic():
        price = _locked_price(price_id)
        before = price_snapshot(price)
        price.tier_override = Tier.FREE.value
        price.needs_review = False
        price.updated_by = actor
        price.save()
        bump(ChangeCounter.CONFIG)
        record_audit(
            target_type="price",
            target_id=price.pk,
            action=AuditEntry.Action.UPDATE,
            actor=actor,
            before=before,
            after=price_snapshot(price),
        )
    return price


def imported_needs_review(
    input_usd_per_mtok: Decimal, output_usd_per_mtok: Decimal, tier_override: str | None
) -> bool:
    """Whether an imported price awaits review: both costs zero (price maps write zero
    where they do not know a price) and no operator's `free` override confirms it."""
    return input_usd_per_mtok == 0 and output_usd_per_mtok == 0 and tier_override != Tier.FREE


def import_price_file(raw: bytes, provider_map: dict[str, str], *, actor: str) -> ImportCounts:
    """Read, parse and import a price file: PriceFileError (nothing written) when it
    cannot be read; malformed rows are skipped and counted."""
    # The provider aliases map LiteLLM's provider ids; `provider_map` (the command's
    # `--map`, the upload's field) is the fallback for the names no alias covers.
    aliases = load_aliases()
    mapping = {
        source.strip().lower(): target
        for source, target in provider_map.items()
        if source.strip().lower() not in aliases
    }
    mapping.update(aliases)
    parsed = parse_price_file(decode_price_file(raw), mapping, limits=price_limits())
    return import_prices(parsed, actor=actor)


def _storable(rows: tuple[PriceRow, ...]) -> tuple[list[PriceRow], int]:
    """The rows that fit the price table (checked again here, whoever parsed them: a
    value beyond a column would break every later read of it), and how many did not."""
    limits = price_limits()
    kept: list[PriceRow] = []
    for row in rows:
        try:
            costs = (
                fit_decimal(row.input_usd_per_mtok, limits.usd_per_mtok),
                fit_decimal(row.output_usd_per_mtok, limits.usd_per_mtok),
            )
        except OutOfRange:
            continue
        if (
            text_problem(row.provider, limits.provider_max_length) is None
            and text_problem(row.model, limits.model_max_length) is None
        ):
            kept.append(row._replace(input_usd_per_mtok=costs[0], output_usd_per_mtok=costs[1]))
    return kept, len(rows) - len(kept)


def import_prices(parsed: ParsedPriceFile, *, actor: str) -> ImportCounts:
    """Upsert every parsed row in one transaction (all or nothing), auditing each change.
    An imported zero/zero row is stored as needing review (tiered as unpriced)."""
    now = timezone.now()
    created = updated = unchanged = needs_review = 0
    aliases = load_aliases()
    # Every provider id normalised (trimmed, lower-cased, aliases mapped); two rows that
    # name one (provider, model) after that: the last wins, as in the file's parse.
    normalised = {
        (row.provider, row.model): row
        for row in (
            row._replace(provider=normalise_provider(row.provider, aliases)) for row in parsed.rows
        )
    }
    rows, invalid = _storable(tuple(normalised.values()))
    with transaction.atomic():
        existing = {
            (price.provider, price.model): price
            for price in ModelPrice.objects.select_for_update().all()
        }
        to_create: list[ModelPrice] = []
        to_update: list[ModelPrice] = []
        audits: list[AuditEntry] = []
        for row in rows:
            price = existing.get((row.provider, row.model))
            if price is None:
                review = imported_needs_review(
                    row.input_usd_per_mtok, row.output_usd_per_mtok, None
                )
                needs_review += review
                to_create.append(
                    ModelPrice(
                        provider=row.provider,
                        model=row.model,
                        input_usd_per_mtok=row.input_usd_per_mtok,
                        output_usd_per_mtok=row.output_usd_per_mtok,
                        source=ModelPrice.Source.IMPORT,
                        needs_review=review,
                        updated_by=actor,
                    )
                )
                continue
            if (price.input_usd_per_mtok, price.output_usd_per_mtok) == (
                row.input_usd_per_mtok,
                row.output_usd_per_mtok,
            ):
                # The same price again: an operator's confirmation or hand entry stands.
                unchanged += 1
                needs_review += price.needs_review
                continue
            before = price_snapshot(price)
            price.input_usd_per_mtok = row.input_usd_per_mtok
            price.output_usd_per_mtok = row.output_usd_per_mtok
            price.source = ModelPrice.Source.IMPORT
            price.needs_review = imported_needs_review(
                row.input_usd_per_mtok, row.output_usd_per_mtok, price.tier_override
            )
            needs_review += price.needs_review
            price.updated_by = actor
            price.updated_at = now
            to_update.append(price)
            audits.append(
                AuditEntry(
                    target_type="price",
                    target_id=str(price.pk),
                    action=AuditEntry.Action.UPDATE,
                    actor=actor,
                    at=now,
                    before=before,
                    after=price_snapshot(price),
                )
            )
        for price in ModelPrice.objects.bulk_create(to_create, batch_size=500):
            created += 1
            audits.append(
                AuditEntry(
                    target_type="price",
                    target_id=str(price.pk),
                    action=AuditEntry.Action.CREATE,
                    actor=actor,
                    at=now,
                    before=None,
                    after=price_snapshot(price),
                )
            )
        ModelPrice.objects.bulk_update(
            to_update,
            [
                "input_usd_per_mtok",
                "output_usd_per_mtok",
                "source",
                "needs_review",
                "updated_by",
                "updated_at",
            ],
            batch_size=500,
        )
        updated = len(to_update)
        AuditEntry.objects.bulk_create(audits, batch_size=500)
        if audits:
            bump(ChangeCounter.CONFIG)
    return ImportCounts(
        created=created,
        updated=updated,
        unchanged=unchanged,
        skipped=parsed.skipped,
        invalid=parsed.invalid + invalid,
        needs_review=needs_review,
    )
