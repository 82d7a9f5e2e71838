"""The states a live page declares, and what its one live region says when one changes.

A live part polls and morphs in place (static/dashboard.js). Its text changes on every
poll (ages, countdowns, counters), so nothing is said from the text: each subject that
has a state an operator acts on marks its element with `data-live-key` (the subject),
`data-live-state` (its state now) and `data-live-say` (the sentence for arriving in that
state). After a poll the script says the sentences of the subjects whose state changed,
once; a counter declares no state, so it is never said."""

from __future__ import annotations

from datetime import UTC

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# Where a connection stands (ladder.web.connection_states.StandState slugs).
STAND_SAID = {
    "in-play": "{} is in play.",
    "dropped-out": "{} dropped out.",
    "cooling-down": "{} is cooling down.",
    "excluded": "{} is out of every pool.",
    "inactive": "{} is inactive.",
    "no-candidate": "{} is in no pool: no candidate names it.",
}


def attributes(key: str, state: str, say: str, *, is_cause: bool = False) -> SafeString:
    """`is_cause`: a connection's own state, said before what follows from it (a pool
    emptying, a candidate out) when one poll brings both."""
    return format_html(
        ' data-live-key="{}" data-live-state="{}" data-live-say="{}"{}',
        key,
        state,
        say,
        mark_safe(' data-live-cause=""') if is_cause else "",
    )


@register.simple_tag
def live_stand(connection_id: str, slug: str) -> SafeString:
    """A connection's standing: "claude-max-1 dropped out."."""
    return attributes(
        f"connection {connection_id}", slug, STAND_SAID[slug].format(connection_id), is_cause=True
    )


@register.simple_tag
def live_pool(auto_id: object, entries: int) -> SafeString:
    """A pool emptying or serving again."""
    if entries:
        return attributes(f"pool {auto_id}", "serving", f"{auto_id} serves again.")
    return attributes(f"pool {auto_id}", "empty", f"{auto_id} is empty.")


@register.simple_tag
def live_member(connection_id: str, auto_id: object, is_in: bool, pair: str = "") -> SafeString:
    """A connection of a pool leaving it or coming back (`pair`: the candidate it serves
    there, "provider/model", when the pool has it under several; the sentence names the
    connection only, so one connection leaving under many models is said once)."""
    key = " ".join(part for part in ("member", str(auto_id), pair, connection_id) if part)
    if is_in:
        return attributes(key, "in", f"{connection_id} is back in {auto_id}.", is_cause=True)
    return attributes(key, "out", f"{connection_id} left {auto_id}.", is_cause=True)


@register.simple_tag
def live_cell(name: str, auto_id: str, state: object) -> SafeString:
    """A candidate in or out of a pool (the matrix's states: in, out by design, out)."""
    said = {
        "in": f"{name} is now in {auto_id}.",
        "out": f"{name} is now out of {auto_id}.",
        "out by design": f"{name} is now out of {auto_id} by design.",
    }[str(state)]
    # The key only needs to be unique on the page: the name's id part ("#3") with the pool.
    return attributes(f"{name.rpartition(' ')[2] or name} {auto_id}", str(state), said)


@register.simple_tag
def live_rung(label: str, usable: int) -> SafeString:
    """A rung with no usable connection left, or with one again."""
    if usable:
        return attributes(
            f"rung {label}", "usable", f"The {label} rung has a usable connection again."
        )
    return attributes(f"rung {label}", "none", f"The {label} rung has no usable connection.")


@register.simple_tag
def live_run(pk: int, state: str) -> SafeString:
    """A simulation run's state: queued, running, done or failed."""
    said = {"done": "finished", "failed": "failed"}.get(state, "is running")
    return attributes(f"simulation {pk}", state, f"Simulation {pk} {said}.")


@register.simple_tag
def live_delivery(pk: int, webhook: str, status: str) -> SafeString:
    """A webhook delivery's status: pending, delivered or failed."""
    return attributes(f"delivery {pk}", status, f"Delivery {pk} to {webhook}: {status}.")


@register.simple_tag(takes_context=True)
def live_updated(context: template.Context, reload_url: str) -> SafeString:
    """A live part's last line, "Live: updated 12:00:07 UTC · reload". The page says when
    the server drew it; a poll's fragment carries no time, and the browser writes when
    each answer came (static/dashboard.js), so a poll of an unchanged part is the same
    bytes every time (answered 304, `omniroute_admin.revalidate`)."""
    request = context.get("request")
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.history_restore_request:
        when = mark_safe("<time data-polled-at>now</time>")
    else:
        now = context["now"].astimezone(UTC)
        when = format_html(
            '<time datetime="{}" data-polled-at>{} UTC</time>',
            f"{now:%Y-%m-%dT%H:%M:%SZ}",
            f"{now:%H:%M:%S}",
        )
    return format_html(
        '<p class="updated">Live: updated {} · <a href="{}">reload</a></p>', when, reload_url
    )
