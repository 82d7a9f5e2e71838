"""Template filters of the dashboard's sentences: catalog entries cited by number
("catalog entry 4") link to the entry's anchor on the catalog page, and instants say
how far they are from now as well as when."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django import template
from django.urls import reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from ladder.core.why import past_tense
from ladder.web.presenters import duration_text

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


# An instant as the core's sentences write it (ladder/core/prose.py `instant_text`).
_INSTANT = re.compile(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) UTC(?! \()")


@register.filter(needs_autoescape=True)
def why_text(text: object, now: datetime | None = None, autoescape: bool = True) -> SafeString:
    """A reason sentence for people: catalog entries linked (`cite_entries`), and each
    absolute instant followed by its distance from `now` ("12:37:00 UTC (in 37 min)"),
    unless the sentence already says it."""
    cited = str(cite_entries(text, autoescape))
    if now is None:
        return mark_safe(cited)

    def relative(match: re.Match[str]) -> str:
        at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        seconds = (at - now).total_seconds()
        distance = duration_text(abs(seconds))
        when = f"in {distance}" if seconds > 0 else "now" if seconds == 0 else f"{distance} ago"
        return f"{match.group(0)} ({when})"

    return mark_safe(_INSTANT.sub(relative, cited))


@register.filter(needs_autoescape=True)
def past_why(text: object, autoescape: bool = True) -> SafeString:
    """A stored reason sentence as history (`ladder.core.why.past_tense`: no "85 s from
    now" long after, verbs in the past), catalog entries linked."""
    return cite_entries(past_tense(str(text)), autoescape)


_CODE_SPAN = re.compile(r"`([^`]+)`")


@register.filter(needs_autoescape=True)
def code_spans(text: object, autoescape: bool = True) -> SafeString:
    """Help text as people read it: escaped, each `literal` (a value to type, such as
    `none` or `*`) set as code, never a backtick on the page."""
    escaped = str(conditional_escape(str(text)) if autoescape else text)
    return mark_safe(_CODE_SPAN.sub(r"<code>\1</code>", escaped))
