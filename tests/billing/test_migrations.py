"""billing.0005: existing prices gain `source` and `needs_review`; an unproven zero is
flagged (fail safe), audited, and the config counter moves."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("billing", "0004_seed_change_counters")]
AFTER = [("billing", "0005_price_source_and_review")]


@pytest.fixture
def executor(transactional_db: None) -> Iterator[MigrationExecutor]:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    yield executor
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_existing_zero_prices_are_flagged_for_review_and_the_rest_kept(
    executor: MigrationExecutor,
) -> None:
    old = executor.loader.project_state(BEFORE).apps
    price = old.get_model("billing", "ModelPrice")
    counter = old.get_model("billing", "ChangeCounter")
    zero, one = Decimal(0), Decimal(1)
    for provider, model, cost, override, by in [
        ("gigachat", "GigaChat-2-Max", zero, None, "import_prices"),  # a placeholder zero
        ("google", "gemma", zero, None, "olga"),  # unproven: the upload audits as olga too
        ("ollama", "*", zero, "free", "olga"),  # confirmed by its override
        ("cohere", "command-a-plus", zero, "cheap", "olga"),  # override, price unknown
        ("openai", "gpt-4o", one, None, "import_prices"),
        ("openai", "o3", one, None, "olga"),
    ]:
        price.objects.create(
            provider=provider,
            model=model,
            input_usd_per_mtok=cost,
            output_usd_per_mtok=cost,
            tier_override=override,
            updated_by=by,
        )
    # (A transactional test run before this one emptied the seeded counters.)
    config_before = counter.objects.get_or_create(name="config")[0].value

    executor.loader.build_graph()
    executor.migrate(AFTER)

    new = executor.loader.project_state(AFTER).apps
    rows = new.get_model("billing", "ModelPrice").objects.order_by("provider", "model")
    assert [(r.provider, r.model, r.source, r.needs_review) for r in rows] == [
        ("cohere", "command-a-plus", "import", True),
        ("gigachat", "GigaChat-2-Max", "import", True),
        ("google", "gemma", "import", True),
        ("ollama", "*", "manual", False),
        ("openai", "gpt-4o", "import", False),
        ("openai", "o3", "manual", False),
    ]
    audits = new.get_model("billing", "AuditEntry").objects.order_by("target_id")
    assert sorted(a.after["model"] for a in audits) == [
        "GigaChat-2-Max",
        "command-a-plus",
        "gemma",
    ]
    assert {(a.actor, a.before["needs_review"], a.after["needs_review"]) for a in audits} == {
        ("migration billing.0005", False, True)
    }
    assert new.get_model("billing", "ChangeCounter").objects.get(name="config").value == (
        config_before + 1
    )
