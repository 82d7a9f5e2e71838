"""Dashboard views: server-rendered pages whose live parts are inline partials that HTMX
polls and swaps. A partial is named after the id of the element it replaces; an HTMX
request gets the partial its `HX-Target` names, a plain request the whole page, so every
page works without JavaScript.

Access: every page needs a login and a role (the `viewer` or `operator` group, or a
superuser); writes need `operator`. Every dashboard response carries `Vary: HX-Request`
(the same URL answers with a page or a fragment, and no cache may mix them up), set
by the access decorators of the kit (`omniroute_admin/dashboard.py`). The
templates use no inline script, no style attribute and no inline event handler, so the
strict Content-Security-Policy of the project's middleware holds; operator- and
gateway-supplied text is always autoescaped, never marked safe.

One module per page (overview, connections, pools, settings, tokens, notifications,
reports, auth); `presenters` shapes models for the templates, `charts` draws the SVG."""
