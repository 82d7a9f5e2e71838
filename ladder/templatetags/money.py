"""One way to write a price or an amount of USD in every page: `{{ value|usd }}`, to the
cent ("2.50", "3.00"), a fraction of a cent keeping its digits ("0.075", "0.0042"), as
`ladder.core.prose.money_text` writes it in sentences and the audit trail in its diffs."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django import template

from ladder.core.prose import money_text

register = template.Library()


@register.filter
def usd(value: object) -> str:
    """A price or amount ("2.5" -> "2.50", Decimal("0.075000") -> "0.075"); "" for none."""
    if value is None or value == "":
        return ""
    try:
        return money_text(Decimal(str(value)))
    except InvalidOperation:
        return str(value)
