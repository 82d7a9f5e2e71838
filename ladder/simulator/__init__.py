"""A pure replay of a traffic trace against simulated providers, one run per routing policy.

Modules: `trace` (requests, the CSV parser, the synthetic trace), `world` (connections,
plan windows, timing, the sizing of registered connections), `providers` (the ground
truth of each connection's windows), `state` (the product's state of each connection in
a run), `run` (one policy over one trace: the core called as the shell calls it),
`results` (policies, outcomes, totals and chart series), `report` (table, CSV, and the
HTML report from `templates/ladder/simulation_report.html`), and the shipped scenarios
`staggered` and `scoped`.

No django, no clock, no IO: the shell (`manage.py simulate`) hands in the world (the
connections with their plan windows, the candidates, the price book and the frozen
`LadderConfig`) and a trace; every run advances its own simulated clock from request to
request and calls the real pure core (`core.decide`, `core.apply_event`,
`core.hysteresis_after`) exactly as the product's shell would at those instants.

The policies compared (`Policy`):

- `thrifty`: this product's `auto/thrifty` (or `auto/<category>:thrifty`). Readings come
  from the product's poller: a poll when the latest reading is `min(refresh interval,
  max_state_age - 30 s)` old, on beat ticks, plus one at every reading's reset instant
  + grace; a `quota_exhausted` event stores an EXHAUSTED reading with the upstream's
  reset instant; hysteresis is stored with every reading; cooldowns are clamped to the
  reset; rung budgets are enforced from the simulated spend ledger.
- `subscription-only`: this product's `auto/subscription`, with the same machinery. It
  fails closed: a request with no verified plan connection is refused, never billed.
- `cheapest-first`: a plain cost sort that ignores plans, quota and budgets: every
  (candidate, connection) pair is priced as metered at its model's price for this
  request's tokens (a plan login of a $3 model costs $3 here, deliberately: that is what
  a strategy blind to billing classes sees) and tried cheapest first, ties in the
  scorer's order. It keeps the gateway's own mechanics (fall-through on failure,
  cooldowns, clamped like this product's), so only the ordering differs from thrifty.
- `original-design`: thrifty as the original system ran it: readings seen only through a
  180 s cache (filled on demand, trusted until it expires, with no notion of a reset
  instant: a reset is noticed when the cache next refills), cooldowns not clamped to the
  reset, hysteresis not wired (every connection always in play), and no EXHAUSTED
  reading stored on a 429. Budgets are enforced as for thrifty, so the comparison
  isolates the return-to-plan mechanics.

Ground truth lives in the simulated providers: a connection's plan windows (e.g. a
5-hour and a weekly window, sized in requests or tokens) fill with the requests routed
to it and empty at each window boundary. A request landing on a connection with a full
window is refused with a 429 naming the instant it serves again, and the gateway falls
through to the next connection of the pool within the same request (ladder.md). A plan
whose overage meters to paid (or an account that can meter: `SimConnection.can_meter`)
keeps serving past its plan and bills the model's price. A window may carry a model scope
(`PlanWindow.model_scope`): it counts and binds only its models' requests, the runs keep
the product's scoped state (`core.scopes`), and `simulate(single_window=True)` replays the
rule before it (every window binds the connection); `scoped` is the shipped scenario
(`manage.py simulate --scoped`) comparing both, and a can-meter plan's evidence ignored
against heeded.
"""
