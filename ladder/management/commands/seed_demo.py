"""`python manage.py seed_demo`: a small live world for `make run`. The four simulated
plan connections share one 10-minute window that restarts on the clock's tens (12:00,
12:10, ... UTC): each drains at its own pace, so they run out one by one from about
minute 6 of every ten, and from about minute 8 to minute 10 every plan is out at once:
`auto/subscription` is empty (it fails closed: the reasons and the countdown to the
reset on the overview), then every plan resets and the pool fills again. Running it
again updates the same rows."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from billing import services as billing_services
from billing.models import BillingCatalogEntry
from ladder import services
from ladder.models import Candidate

DEMO_ACTOR = "seed_demo"


# Every plan's window: 10 minutes from the epoch, so it restarts on the clock's tens.
DEMO_WINDOW_SECONDS = 600


def _plan(burn_per_minute: float, window_seconds: int, phase_seconds: int) -> str:
    return json.dumps(
        {
            "plan_size": 1000,
            "burn_per_minute": burn_per_minute,
            "window_seconds": window_seconds,
            "phase_seconds": phase_seconds,
        }
    )


CONNECTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "claude-max-1",
        {
            "provider": "claude",
            "auth_type": "oauth",
            "label": "Claude Max (team)",
            "quota_source": "simulated",
            "credential": _plan(125, DEMO_WINDOW_SECONDS, 0),  # out at minute 8
        },
    ),
    (
        "claude-max-2",
        {
            "provider": "claude",
            "auth_type": "oauth",
            "label": "Claude Max (backup)",
            "quota_source": "simulated",
            "credential": _plan(150, DEMO_WINDOW_SECONDS, 0),  # out at 6:40
        },
    ),
    (
        "codex-plus",
        {
            "provider": "codex",
            "auth_type": "oauth",
            "label": "ChatGPT Plus (Codex)",
            "quota_source": "simulated",
            "credential": _plan(140, DEMO_WINDOW_SECONDS, 0),  # out at 7:09
        },
    ),
    (
        "cursor-pro",
        {
            "provider": "cursor",
            "auth_type": "oauth",
            "label": "Cursor Pro",
            "quota_source": "simulated",
            "credential": _plan(130, DEMO_WINDOW_SECONDS, 0),  # out at 7:42
        },
    ),
    ("ollama-local", {"provider": "ollama", "auth_type": "none", "label": "Local Ollama"}),
    ("groq-key", {"provider": "groq", "auth_type": "apikey", "label": "Groq free tier"}),
    ("openai-key", {"provider": "openai", "auth_type": "apikey", "label": "OpenAI API key"}),
    (
        "anthropic-key",
        {
            "provider": "claude",
            "auth_type": "apikey",
            "label": "Anthropic API key (uncurated: counts as metered)",
        },
    ),
)

CATALOG = (
    ("openai", None, "metered", "meters-to-paid", "API keys bill per token."),
    ("groq", None, "metered", "hard-stop", "Free tier refuses past its limit; paid keys bill."),
)

PRICES = (
    ("openai", "gpt-4o", "2.50", "10.00"),
    ("openai", "gpt-4o-mini", "0.15", "0.60"),
    ("groq", "*", "0", "0"),
    ("claude", "claude-sonnet-4-5", "3.00", "15.00"),
    ("ollama", "*", "0", "0"),
)

# A fortnight of demo traffic, per UTC day back from today: (connection, provider,
# model, requests, input and output tokens per request). Plan requests cost nothing and
# their list price is what the plan saved; the paid ones stay well inside the budgets.
DEMO_TRAFFIC = (
    ("claude-max-1", "claude", "claude-sonnet-4-5", 6, 40_000, 9_000),
    ("openai-key", "openai", "gpt-4o-mini", 5, 30_000, 6_000),
    ("anthropic-key", "claude", "claude-sonnet-4-5", 1, 20_000, 4_000),
)
DEMO_DAYS = 14


def record_demo_spend(now: datetime) -> int:
    """Record the demo traffic through the spend service (idempotent: fixed request ids);
    the number of new ledger entries."""
    created = 0
    for day in range(DEMO_DAYS):
        for connection_id, provider, model, requests, tokens_in, tokens_out in DEMO_TRAFFIC:
            # Fewer requests on some days, so the chart has a shape.
            for n in range(max(1, requests - day % 4)):
                _, new = services.record_spend(
                    services.SpendInput(
                        request_id=f"demo-spend-{connection_id}-{day}-{n}",
                        connection_id=connection_id,
                        provider=provider,
                        model=model,
                        input_tokens=tokens_in,
                        output_tokens=tokens_out,
                        occurred_at=now - timedelta(days=day, minutes=10 * n + 5),
                    ),
                    now=now,
                )
                created += new
    return created


CANDIDATES = (
    (
        "claude",
        "claude-sonnet-4-5",
        ("coding", "reasoning"),
        0,
        None,
        ("claude-max-1", "claude-max-2", "anthropic-key"),
    ),
    ("codex", "gpt-5-codex", ("coding",), 1, "codex-plus", None),
    ("cursor", "cursor-fast", ("coding",), 2, "cursor-pro", None),
    ("ollama", "llama3.1", ("chat",), 3, "ollama-local", None),
    ("groq", "llama-3.3-70b", ("chat", "coding"), 4, "groq-key", None),
    ("openai", "gpt-4o-mini", ("chat", "coding"), 5, "openai-key", None),
    ("openai", "gpt-4o", ("reasoning", "coding"), 6, "openai-key", None),
)


class Command(BaseCommand):
    help = "Create (or refresh) the demo world: simulated plans, keys, candidates, prices."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--with-spend",
            action="store_true",
            help="also a fortnight of spend on the paid rungs and the plans (the spend page's "
            "demo; `make run` adds it on a new checkout)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            for provider, auth_type, billing, overage, reason in CATALOG:
                if not BillingCatalogEntry.objects.filter(
                    provider=provider, auth_type=auth_type
                ).exists():
                    billing_services.create_catalog_entry(
                        billing_services.CatalogInput(
                            provider, auth_type, billing, overage, reason
                        ),
                        actor=DEMO_ACTOR,
                    )
            for provider, model, input_price, output_price in PRICES:
                billing_services.upsert_price(
                    billing_services.PriceInput(
                        provider, model, Decimal(input_price), Decimal(output_price), None
                    ),
                    actor=DEMO_ACTOR,
                )
            for connection_id, fields in CONNECTIONS:
                services.upsert_connection(
                    connection_id, services.ConnectionInput(**fields), actor=DEMO_ACTOR
                )
            for candidate_id in list(Candidate.objects.values_list("pk", flat=True)):
                services.delete_candidate(candidate_id, actor=DEMO_ACTOR)
            for provider, model, categories, priority, pinned, allowed in CANDIDATES:
                services.save_candidate(
                    services.CandidateInput(provider, model, categories, priority, pinned, allowed),
                    actor=DEMO_ACTOR,
                )
            # Through the service like every settings write: validated, audited, counted.
            tuning, _ = services.effective_settings_of(services.get_settings_row())
            tuning.update(cheap_budget_usd=Decimal("5"), premium_budget_usd=Decimal("20"))
            services.update_settings(tuning, actor=DEMO_ACTOR)
        if options["with_spend"]:
            record_demo_spend(timezone.now())
        self.stdout.write(
            f"Demo world ready: {len(CONNECTIONS)} connections, {len(CANDIDATES)} candidates. "
            "The plans reset on the clock's tens (UTC); from about minute 8 to 10 of every "
            "ten all are out and auto/subscription is empty."
        )
