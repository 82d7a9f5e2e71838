"""The gateway API of the ladder (spec/api.md), one module per endpoint group, each with
its own Router; omniroute_admin.api mounts them in the order of ROUTERS. Importing a
module registers routes on its own router only, never on another's.

| module | endpoints |
|---|---|
| `connections` | connections, a connection's status and refresh |
| `events` | readings, events, a batch of events (`event_batch`: the batch's entries) |
| `candidates` | the registered candidates |
| `history` | a pool's timeline (before `pools`: its path would be taken for an auto id) |
| `pools` | the pools, GET and POST (`pool_answers`: the rendered answers and their tags) |
| `feed` | the change feed and its hold protocol |
| `models_list` | the OpenAI-style models list |
| `settings` | the ladder's tuning |
| `spend` | spend reports, one or a batch, the summary, the ledger (`spend_answers`) |
| `forecasts` | plan forecasts and their outcomes |
| `ledger_replays` | what a different purchase would have saved: a ledger replay started and read |
"""

from __future__ import annotations

from ninja import Router

from ladder.api import (
    candidates,
    connections,
    events,
    feed,
    forecasts,
    history,
    ledger_replays,
    models_list,
    pools,
    settings,
    spend,
)

# The order they are mounted in: Django resolves the first path that matches.
ROUTERS: tuple[Router, ...] = (
    history.router,
    forecasts.router,
    ledger_replays.router,
    connections.router,
    events.router,
    candidates.router,
    pools.router,
    feed.router,
    models_list.router,
    settings.router,
    spend.router,
)
