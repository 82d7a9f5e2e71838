"""Template filters of the dashboard's sentences: catalog entries cited by number
("catalog entry 4") link to the entry's anchor on the catalog page."""

from __future__ import annotations

import re

from django import template
from django.urls import reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_CITATION = re.compile(r"\bcatalog entry (\d+)\b")


@register.filter(needs_autoescape=True)
def cite_entries(text: object, autoescape: bool = True) -> SafeString:
    """The text, escaped, with each "catalog entry N" a link to `/catalog/#entry-N`."""
    escaped = str(conditional_escape(str(text)) if autoescape else text)
    if "catalog entry" not in escaped:
        return mark_safe(escaped)
    catalog = reverse("billing:catalog")
    return mark_safe(
        _CITATION.sub(
            lambda m: format_html(
                '<a href="{}#entry-{}">catalog entry {}</a>', catalog, m.group(1), m.group(1)
            ),
            escaped,
        )
    )
