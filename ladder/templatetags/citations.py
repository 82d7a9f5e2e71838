"""Template filters of the dashboard's sentences: catalog entries cited by number
("catalog entry 4") link to the entry's anchor on the catalog page, and instants say
how far they are from now as well as when (the distance told by the browser, so a poll of
an unchanged page is the same bytes)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django import template
from django.urls import reverse
from django.utils.dateformat import format as date_format
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from ladder.core.why import past_tense

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


# An instant as the core's sentences write it (ladder/core/prose.py `instant_text`), with
# the distance the core may have added ("(95 s from now)": true only when it was written).
# Another parenthesis after an instant already says something of it: left as it is.
_INSTANT = re.compile(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) UTC(?: \(\d+ s from now\)|(?! \())")
_FALLBACK_FORMAT = "%Y-%m-%d %H:%M:%S UTC"


def relative_time(at: datetime, direction: str, absolute: str = "") -> SafeString:
    """An instant the browser tells as its distance from now ("20 s ago", "in 37 min"),
    refreshed every second by static/dashboard.js. The server writes the instant only, so
    an unchanged page is the same bytes on every poll (a 304). `direction`: "past" (an
    age, never said as ahead) or "future" (a countdown, "now" at zero, then "... ago").
    `absolute`: the instant as the page writes it, kept in front of the distance
    ("12:01:35 UTC (in 1 min 35 s)"); without it the distance alone is shown, the full
    instant being the text without JavaScript and the tooltip."""
    moment = at.astimezone(UTC)
    iso = f"{moment:%Y-%m-%dT%H:%M:%SZ}"
    if absolute:
        return format_html(
            '<time datetime="{}" data-relative="{}" data-absolute="{}">{}</time>',
            iso,
            direction,
            absolute,
            absolute,
        )
    full = f"{moment:{_FALLBACK_FORMAT}}"
    return format_html(
        '<time datetime="{}" data-relative="{}" title="{}">{}</time>', iso, direction, full, full
    )


@register.simple_tag
def relative(at: datetime, direction: str = "past", absolute_format: str = "") -> SafeString:
    """`relative_time` in a template: `{% relative reading.checked_at %}`, `{% relative
    reset_at "future" "H:i:s" %}` (a Django date format: the instant kept in front)."""
    absolute = f"{date_format(at.astimezone(UTC), absolute_format)} UTC" if absolute_format else ""
    return relative_time(at, direction, absolute)


@register.filter(needs_autoescape=True)
def why_text(text: object, now: datetime | None = None, autoescape: bool = True) -> SafeString:
    """A reason sentence for people: catalog entries linked (`cite_entries`), and each
    absolute instant followed by its distance from now, told by the browser
    ("12:37:00 UTC (in 37 min)", `relative_time`): a distance the sentence already says
    ("(95 s from now)") is the one of when it was decided, so it gives way to that one.
    `now` (when the page was drawn) says whether the instant is ahead or past."""
    cited = str(cite_entries(text, autoescape))
    if now is None:
        return mark_safe(cited)

    def relative(match: re.Match[str]) -> str:
        at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        direction = "future" if at > now else "past"
        return str(relative_time(at, direction, f"{match.group(1)} UTC"))

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
