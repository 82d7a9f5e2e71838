"""Examples for the response schemas of the OpenAPI document, so every operation in
/api/v1/docs shows what it answers. Attached to the schemas at import (see api.py)."""

from __future__ import annotations

from typing import Any

T = "2026-11-29T12:00:00Z"
RESET = "2026-11-29T17:00:00Z"
FORECAST = {
    "runs_out_at": "2026-11-29T14:00:00Z",
    "before_reset": True,
    "paid_until_reset_usd": 3.1,
    "basis": "from 7 readings over the last 52 min, and the paid rungs' spend over the last 60 min",
    "reset_at": RESET,
    "paid_by_rung": {"cheap": 3.1, "premium": 0.0},
    "sentence": "claude-max-1 runs out in about 2 h, 3 h before its reset; at the "
    "current mix the cheap rung takes about $3.10 until then.",
    "scopes": [
        {
            "model_scope": "opus",
            "runs_out_at": "2026-11-29T13:10:00Z",
            "before_reset": True,
            "paid_until_reset_usd": 73.19,
            "basis": "from 7 readings over the last 52 min, and the paid rungs' spend over "
            "the last 60 min",
            "reset_at": "2026-12-02T12:00:00Z",
            "paid_by_rung": {"cheap": 73.19, "premium": 0.0},
            "sentence": "claude-max-1 (model scope opus) runs out in about 1 h, 3 d before "
            "its reset; at the current mix the cheap rung takes about $73.19 until then.",
        }
    ],
}

EXAMPLES: dict[str, dict[str, Any]] = {
    "EntryOut": {
        "id": 1,
        "provider": "claude",
        "auth_type": "oauth",
        "billing": "subscription",
        "overage": "hard-stop",
        "reason": "Pro/Max plan windows refuse past the limit until reset",
        "version": 1,
        "updated_at": T,
        "updated_by": "token:ops",
    },
    "PriceOut": {
        "id": 7,
        "provider": "openai",
        "model": "gpt-4o-mini",
        "input_usd_per_mtok": 0.15,
        "output_usd_per_mtok": 0.6,
        "tier_override": None,
        "source": "import",
        "needs_review": False,
        "tier": "cheap",
    },
    "ConnectionOut": {
        "connection_id": "claude-max-1",
        "provider": "claude",
        "auth_type": "oauth",
        "label": "Team Max plan",
        "active": True,
        "quota_source": "claude",
        "has_credential": True,
    },
    "ReadingOut": {
        "status": "SAFE",
        "remaining_percent": 41.5,
        "reset_at": RESET,
        "checked_at": T,
        "windows": [{"name": "five_hour", "remaining_percent": 41.5, "reset_at": RESET}],
        "source": "claude",
        "detail": "binding window five_hour: 41.5 % left",
    },
    "StatusOut": {
        "connection_id": "claude-max-1",
        "provider": "claude",
        "auth_type": "oauth",
        "active": True,
        "billing": {
            "billing": "subscription",
            "overage": "hard-stop",
            "reason": "Pro/Max plan windows refuse past the limit until reset",
            "catalog_entry_id": 1,
        },
        "rung": "subscription",
        "reading": {
            "status": "SAFE",
            "remaining_percent": 41.5,
            "reset_at": RESET,
            "checked_at": T,
            "windows": [],
            "source": "claude",
            "detail": "",
        },
        "reading_current": True,
        "hysteresis": {"state": "in_play", "since": T, "reason": "in play since its first reading"},
        "forecast": FORECAST,
        "cooldown_until": None,
        "consecutive_failures": 0,
        "quota_error": "",
    },
    "QueuedOut": {"queued": True},
    "EventResultOut": {
        "connection_id": "claude-max-1",
        "cooldown_until": "2026-11-29T12:00:05Z",
        "cooldown_seconds": 5.0,
        "clamped_to_reset": False,
        "consecutive_failures": 1,
    },
    "CandidateOut": {
        "id": 3,
        "provider": "claude",
        "model": "claude-sonnet-4-5",
        "categories": ["coding"],
        "priority": 0,
        "connection_id": None,
        "allowed_connection_ids": ["claude-max-1", "claude-max-2"],
        "ref": "claude-sonnet-plan-and-key",
    },
    "DecisionOut": {
        "auto_id": "auto/thrifty",
        "grouping": "thrifty",
        "category": None,
        "fail_mode": "open",
        "computed_at": T,
        "candidates": [
            {
                "id": 3,
                "ref": "claude-sonnet-plan-and-key",
                "provider": "claude",
                "model": "claude-sonnet-4-5",
                "rung": "subscription",
                "connection_id": None,
                "allowed_connection_ids": ["claude-max-1"],
            },
            {
                "id": 3,
                "ref": "claude-sonnet-plan-and-key",
                "provider": "claude",
                "model": "claude-sonnet-4-5",
                "rung": "premium",
                "connection_id": None,
                "allowed_connection_ids": ["anthropic-key"],
            },
        ],
        "excluded": [
            {
                "provider": "claude",
                "model": "claude-sonnet-4-5",
                "connection_id": "claude-max-2",
                "rung": "subscription",
                "reason": "below_reentry",
                "detail": "3.0 % left, re-entry needs more than 5 %",
            },
        ],
        "next_change_at": RESET,
        "budget_left_usd": {"cheap": 12.5, "premium": None},
        "valid_until": "2026-11-29T12:10:00Z",
    },
    "ModelListOut": {
        "object": "list",
        "data": [
            {"id": "auto/subscription", "object": "model", "created": 0, "owned_by": "omniroute"},
            {"id": "auto/thrifty", "object": "model", "created": 0, "owned_by": "omniroute"},
        ],
    },
    "SpendOut": {
        "request_id": "req_01HZX",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 0.00036,
        "input_tokens": 1200,
        "output_tokens": 300,
        "occurred_at": T,
        "rung": "cheap",
        "billed_usd": 0.00036,
        "list_price_usd": 0.00036,
    },
    "SpendSummaryOut": {
        "budget_window": "month",
        "window_start": "2026-11-01T00:00:00Z",
        "window_end": "2026-12-01T00:00:00Z",
        "rungs": {
            "cheap": {"spent_usd": 3.25, "budget_usd": 20.0, "exhausted": False},
            "premium": {"spent_usd": 0.0, "budget_usd": None, "exhausted": False},
        },
        "saved_usd": 41.7,
    },
    "AliasOut": {"alias": "anthropic", "provider": "claude"},
    "PlanForecastOut": {"connection_id": "claude-max-1", **FORECAST},
    "OutcomeOut": {
        "connection_id": "claude-max-1",
        "window_reset_at": RESET,
        "forecast_at": T,
        "runs_out_at": "2026-11-29T14:00:00Z",
        "before_reset": True,
        "paid_until_reset_usd": 3.1,
        "basis": "from 7 readings over the last 52 min",
        "ran_out_at": "2026-11-29T14:12:00Z",
        "closed": True,
        "outcome": "ran_out_as_forecast",
        "error_seconds": 720.0,
    },
    "LedgerReplayOut": {
        "id": 3,
        "state": "running",
        "requested_by": "token:ops",
        "created_at": T,
        "finished_at": None,
        "period_start": "2026-11-01T00:00:00Z",
        "period_end": "2026-11-29T00:00:00Z",
        "change": "one more seat like claude-max-1",
        "progress_done": 4002,
        "progress_total": 8002,
        "stage": "Replaying as bought: request 4,000 of 4,000",
        "error": "",
        "result": None,
    },
}
PATH_EXAMPLES = {
    "entry_id": 1,
    "price_id": 7,
    "candidate_id": 3,
    "auto_id": "auto/thrifty",
    "alias": "anthropic",
    "run_id": 3,
}


def add_examples(schema: dict[str, Any]) -> dict[str, Any]:
    """Attach the examples to the generated document (components and path parameters)."""
    components = schema.get("components", {}).get("schemas", {})
    for name, example in EXAMPLES.items():
        if name in components:
            components[name].setdefault("examples", [example])
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                name = parameter.get("name")
                if name in PATH_EXAMPLES and parameter.get("in") == "path":
                    parameter.setdefault("example", PATH_EXAMPLES[name])
    return schema
