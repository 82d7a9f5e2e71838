"""The pure billing classifier: first match wins; no database needed."""

from __future__ import annotations

import pytest

from billing.classify import (
    KEYLESS_VERDICT,
    UNCURATED_VERDICT,
    Billing,
    BillingVerdict,
    Catalog,
    CatalogRow,
    Overage,
    classify_connection,
)

ROWS = (
    CatalogRow(1, "claude", "oauth", Billing.SUBSCRIPTION, Overage.HARD_STOP, "plan"),
    CatalogRow(2, "claude", None, Billing.METERED, Overage.METERS_TO_PAID, "api keys bill"),
    CatalogRow(3, "copilot", "apikey", Billing.SUBSCRIPTION, Overage.UNKNOWN, "seat"),
    CatalogRow(4, "openrouter", None, Billing.METERED, Overage.METERS_TO_PAID, "per token"),
)


@pytest.mark.parametrize(
    ("provider", "auth_type", "expected"),
    [
        pytest.param("claude", "none", KEYLESS_VERDICT, id="no-auth-sentinel-skips-catalog"),
        pytest.param("unheard-of", "none", KEYLESS_VERDICT, id="no-auth-even-when-uncurated"),
        pytest.param(
            "claude",
            "oauth",
            BillingVerdict(Billing.SUBSCRIPTION, Overage.HARD_STOP, "plan", 1),
            id="auth-specific-beats-provider-wide",
        ),
        pytest.param(
            "claude",
            "apikey",
            BillingVerdict(Billing.METERED, Overage.METERS_TO_PAID, "api keys bill", 2),
            id="provider-wide-fallback",
        ),
        pytest.param(
            "openrouter",
            None,
            BillingVerdict(Billing.METERED, Overage.METERS_TO_PAID, "per token", 4),
            id="no-auth-type-uses-provider-wide",
        ),
        pytest.param("codex", "oauth", UNCURATED_VERDICT, id="uncurated-is-unknown"),
        pytest.param("copilot", "oauth", UNCURATED_VERDICT, id="other-auth-without-wide-entry"),
    ],
)
def test_classify_connection_first_match_wins(
    provider: str, auth_type: str | None, expected: BillingVerdict
) -> None:
    assert classify_connection(provider, auth_type, ROWS) == expected


def test_uncurated_verdict_is_unknown_billing_and_overage() -> None:
    verdict = Catalog([]).classify("brand-new", "oauth")

    assert (verdict.billing, verdict.overage, verdict.catalog_entry_id) == (
        Billing.UNKNOWN,
        Overage.UNKNOWN,
        None,
    )


@pytest.mark.parametrize(
    ("billing", "expected"),
    [
        pytest.param(Billing.SUBSCRIPTION, True, id="subscription"),
        pytest.param(Billing.KEYLESS, True, id="keyless"),
        pytest.param(Billing.METERED, False, id="metered"),
        pytest.param(Billing.UNKNOWN, False, id="unknown-is-not-free"),
    ],
)
def test_is_plan_included_truth_table(billing: Billing, expected: bool) -> None:
    verdict = BillingVerdict(billing, Overage.HARD_STOP, "r", None)

    assert verdict.is_plan_included is expected


@pytest.mark.parametrize(
    ("overage", "expected"),
    [
        pytest.param(Overage.HARD_STOP, True, id="hard-stop"),
        pytest.param(Overage.METERS_TO_PAID, False, id="meters-to-paid"),
        pytest.param(Overage.UNKNOWN, False, id="unknown-counts-as-meters-to-paid"),
    ],
)
def test_is_overage_safe_truth_table(overage: Overage, expected: bool) -> None:
    verdict = BillingVerdict(Billing.SUBSCRIPTION, overage, "r", None)

    assert verdict.is_overage_safe is expected


def test_classifier_module_names_no_provider() -> None:
    from pathlib import Path

    import billing.classify as module

    source = Path(module.__file__).read_text(encoding="utf-8").lower()

    for provider in ("claude", "codex", "copilot", "cursor", "antigravity", "devin", "openai"):
        assert provider not in source
