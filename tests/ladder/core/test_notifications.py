"""The pure notification rules: the exact transitions of scripted sequences (one per
transition, none while a state holds), the refused targets, the bodies, the signature
and the backoff. No database."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from ipaddress import ip_address
from typing import Any

import pytest

from ladder.core import notifications as rules
from ladder.core import webhooks as webhook_rules
from ladder.core.notifications import (
    BudgetObservation,
    CredentialObservation,
    Kind,
    Notified,
    Observation,
    PlanObservation,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MONTH = datetime(2026, 11, 1, tzinfo=UTC)
NEXT_MONTH = datetime(2026, 12, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run_script(observations: Sequence[Observation]) -> list[list[tuple[str, str, datetime]]]:
    """Evaluate each observation in turn against the state the previous ones left, as
    the shell does; the (kind, key, at) of each step's transitions."""
    state: dict[str, Notified] = {}
    steps = []
    for observed in observations:
        evaluation = rules.evaluate(state, observed)
        state.update(evaluation.changes)
        steps.append([(t.kind.value, t.key, t.at) for t in evaluation.transitions])
    return steps


def plan(seconds: float, dropped: bool, since: float) -> Observation:
    return Observation(
        now=at(seconds),
        plans=[PlanObservation("claude-max-1", dropped, at(since), "why")],
    )


def readings(seconds: float, newest: float | None) -> Observation:
    return Observation(
        now=at(seconds),
        newest_polled_reading_at=at(newest) if newest is not None else None,
        max_state_age_seconds=180,
    )


def subscription(seconds: float, is_empty: bool) -> Observation:
    return Observation(
        now=at(seconds),
        subscription_is_empty=is_empty,
        subscription_empty_after=timedelta(seconds=300),
    )


def credential(seconds: float, rejected: bool) -> Observation:
    found = [CredentialObservation("codex-1", "The usage endpoint rejected the credential.")]
    return Observation(now=at(seconds), rejected_credentials=found if rejected else [])


def budget(
    seconds: float,
    spent: str,
    amount: str | None = "100",
    window: datetime = MONTH,
) -> Observation:
    end = NEXT_MONTH if window == MONTH else datetime(2027, 1, 1, tzinfo=UTC)
    return Observation(
        now=at(seconds),
        budgets=[
            BudgetObservation(
                "cheap",
                Decimal(spent),
                Decimal(amount) if amount is not None else None,
                "month",
                window,
                end,
            )
        ],
    )


SCRIPTS = [
    pytest.param(
        [plan(0, False, 0), plan(30, True, 20), plan(60, True, 20), plan(90, False, 80)],
        [
            [],
            [("plan_exhausted", "plan:claude-max-1#1", at(20))],
            [],
            [("plan_back", "plan:claude-max-1#2", at(80))],
        ],
        id="plan-drops-out-holds-and-comes-back",
    ),
    pytest.param(
        [plan(0, True, -50), plan(30, True, -50)],
        [[("plan_exhausted", "plan:claude-max-1#1", at(-50))], []],
        id="plan-first-seen-dropped-out-is-notified-once",
    ),
    pytest.param(
        [
            readings(0, -10),
            readings(200, -10),
            readings(230, -10),
            readings(260, 255),
            readings(290, 255),
        ],
        [
            [],
            [("readings_stale", "readings#1", at(170))],
            [],
            [("readings_fresh", "readings#2", at(255))],
            [],
        ],
        id="readings-go-stale-and-fresh",
    ),
    pytest.param(
        [readings(0, None), readings(1000, None)],
        [[], []],
        id="readings-never-polled-are-not-stale",
    ),
    pytest.param(
        [
            subscription(0, True),
            subscription(200, True),
            subscription(300, True),
            subscription(330, True),
            subscription(360, False),
            subscription(390, False),
        ],
        [
            [],
            [],
            [("subscription_empty", "subscription#1", at(300))],
            [],
            [("subscription_back", "subscription#2", at(360))],
            [],
        ],
        id="subscription-empty-for-the-set-time-then-back",
    ),
    pytest.param(
        [
            subscription(0, True),
            subscription(100, False),
            subscription(200, True),
            subscription(450, True),
            subscription(500, True),
        ],
        [[], [], [], [], [("subscription_empty", "subscription#1", at(500))]],
        id="subscription-empty-briefly-is-not-notified-and-the-clock-restarts",
    ),
    pytest.param(
        [
            credential(0, True),
            credential(30, True),
            credential(60, False),
            credential(90, True),
        ],
        [
            [("credential_rejected", "credential:codex-1#1", at(0))],
            [],
            [],
            [("credential_rejected", "credential:codex-1#2", at(90))],
        ],
        id="credential-rejected-once-per-rejection",
    ),
    pytest.param(
        [
            budget(0, "10"),
            budget(30, "55"),
            budget(60, "60"),
            budget(90, "85"),
            budget(120, "100"),
            budget(150, "120"),
        ],
        [
            [],
            [("budget_crossed", "budget:cheap#1", at(30))],
            [],
            [("budget_crossed", "budget:cheap#2", at(90))],
            [("budget_crossed", "budget:cheap#3", at(120))],
            [],
        ],
        id="budget-50-80-100-once-each",
    ),
    pytest.param(
        [budget(0, "100"), budget(30, "0", window=NEXT_MONTH), budget(60, "90", window=NEXT_MONTH)],
        [
            [("budget_crossed", "budget:cheap#1", at(0))],
            [],
            [("budget_crossed", "budget:cheap#2", at(60))],
        ],
        id="budget-thresholds-start-afresh-in-a-new-window",
    ),
    pytest.param(
        [budget(0, "85"), budget(30, "120", amount="200"), budget(60, "170", amount="200")],
        [
            [("budget_crossed", "budget:cheap#1", at(0))],
            [("budget_crossed", "budget:cheap#2", at(30))],
            [("budget_crossed", "budget:cheap#3", at(60))],
        ],
        id="budget-thresholds-start-afresh-for-a-new-budget",
    ),
    pytest.param(
        [budget(0, "500", amount=None), budget(30, "500", amount="0")],
        [[], []],
        id="no-budget-or-a-disabled-rung-has-nothing-to-cross",
    ),
]


@pytest.mark.parametrize(("observations", "expected"), SCRIPTS)
def test_scripted_sequences_notify_exactly_these_transitions(
    observations: list[Observation], expected: list[list[tuple[str, str, datetime]]]
) -> None:
    assert run_script(observations) == expected


def test_a_dropped_out_plan_says_when_its_window_resets() -> None:
    reset = at(5 * 3600)
    observed = Observation(
        now=T0, plans=[PlanObservation("claude-max-1", True, at(-10), "why", reset_at=reset)]
    )

    [transition] = rules.evaluate({}, observed).transitions

    assert transition.details == {
        "connection_id": "claude-max-1",
        "since": "2026-11-29T11:59:50+00:00",
        "reason": "why",
        "reset_at": "2026-11-29T17:00:00+00:00",
    }
    assert webhook_rules.recovery_of(transition.kind, transition.details) == reset


def test_a_state_that_holds_is_notified_once() -> None:
    observed = Observation(
        now=T0,
        newest_polled_reading_at=at(-1000),
        plans=[PlanObservation("claude-max-1", True, at(-10), "why")],
        rejected_credentials=[CredentialObservation("codex-1", "rejected")],
        budgets=budget(0, "150").budgets,
    )
    later = [replace(observed, now=at(seconds)) for seconds in (30, 60, 90)]

    steps = run_script([observed, *later])

    assert [len(step) for step in steps] == [4, 0, 0, 0]


def test_transitions_come_in_a_fixed_order() -> None:
    state = {"subscription": Notified("empty_pending", since=at(-400))}
    observed = Observation(
        now=T0,
        newest_polled_reading_at=at(-1000),
        subscription_is_empty=True,
        plans=[
            PlanObservation("zed", True, at(-5), "why"),
            PlanObservation("alpha", True, at(-5), "why"),
        ],
        rejected_credentials=[CredentialObservation("codex-1", "rejected")],
        budgets=budget(0, "80").budgets,
    )

    evaluation = rules.evaluate(state, observed)

    assert [t.key for t in evaluation.transitions] == [
        "readings#1",
        "subscription#1",
        "plan:alpha#1",
        "plan:zed#1",
        "credential:codex-1#1",
        "budget:cheap#1",
    ]


def test_a_jump_past_several_thresholds_is_one_notification_naming_them() -> None:
    evaluation = rules.evaluate({}, budget(0, "100.00"))

    (transition,) = evaluation.transitions
    assert transition.summary == (
        "The cheap rung has spent 100.00 USD of its 100.00 USD month budget (100 %), past "
        "the 100 % threshold. The rung is exhausted: it is left out of every pool until "
        "the window ends."
    )
    assert transition.details == {
        "rung": "cheap",
        "threshold_percent": 100,
        "thresholds_passed": [50, 80, 100],
        "spent_usd": 100.0,
        "budget_usd": 100.0,
        "spent_percent": 100.0,
        "budget_window": "month",
        "window_start": "2026-11-01T00:00:00+00:00",
        "window_end": "2026-12-01T00:00:00+00:00",
    }
    assert evaluation.changes == {
        "budget:cheap": Notified("100", None, 1, "2026-11-01T00:00:00+00:00 100")
    }


def test_the_messages_carry_the_numbers() -> None:
    observed = Observation(
        now=T0,
        newest_polled_reading_at=at(-412),
        max_state_age_seconds=180,
        plans=[
            PlanObservation(
                "claude-max-1", True, at(-5), "1.5 % left, at or below the exit cutoff of 2 %"
            )
        ],
    )

    summaries = [t.summary for t in rules.evaluate({}, observed).transitions]

    assert summaries == [
        "The newest polled quota reading is 412 s old, past the 180 s limit: the worker or "
        "the broker may be down, and auto/subscription excludes every connection whose "
        "reading is stale.",
        "Plan connection claude-max-1 dropped out: 1.5 % left, at or below the exit cutoff "
        "of 2 %. Traffic that allows it escalates to the next rung.",
    ]


def test_an_empty_subscription_says_why_by_reason() -> None:
    state = {"subscription": Notified("empty_pending", since=at(-301))}
    observed = Observation(
        now=T0,
        subscription_is_empty=True,
        subscription_reasons={"quota_stale": 1, "quota_exhausted": 2},
        subscription_empty_after=timedelta(seconds=300),
    )

    (transition,) = rules.evaluate(state, observed).transitions

    assert transition.summary == (
        "auto/subscription has had no usable connection for 301 s (since "
        "2026-11-29T11:54:59+00:00): requests naming it get an empty pool. Excluded "
        "connections by reason: quota_exhausted 2, quota_stale 1."
    )
    assert transition.at == at(-1)


# --- targets ------------------------------------------------------------------------------

ALWAYS_REFUSED = [
    ("169.254.169.254", "169.254.169.254 is a cloud metadata address"),
    ("169.254.170.2", "169.254.170.2 is a cloud metadata address"),
    ("fd00:ec2::254", "fd00:ec2::254 is a cloud metadata address"),
    ("100.100.100.200", "100.100.100.200 is a cloud metadata address"),
    ("169.254.10.1", "169.254.10.1 is a link-local address"),
    ("fe80::1", "fe80::1 is a link-local address"),
    ("0.0.0.0", "0.0.0.0 is an unspecified address"),
    ("0.1.2.3", "0.1.2.3 is an unspecified address"),
    ("::", ":: is an unspecified address"),
    ("224.0.0.1", "224.0.0.1 is a multicast address"),
    ("ff02::1", "ff02::1 is a multicast address"),
    ("255.255.255.255", "255.255.255.255 is a reserved address"),
    ("240.0.0.1", "240.0.0.1 is a reserved address"),
    (
        "::ffff:169.254.169.254",
        "169.254.169.254 is a cloud metadata address (inside ::ffff:a9fe:a9fe)",
    ),
    (
        "64:ff9b::a9fe:a9fe",
        "169.254.169.254 is a cloud metadata address (inside 64:ff9b::a9fe:a9fe)",
    ),
    ("2002:a9fe:a9fe::1", "169.254.169.254 is a cloud metadata address (inside 2002:a9fe:a9fe::1)"),
]
PRIVATE = [
    ("127.0.0.1", "127.0.0.1 is a loopback address"),
    ("127.8.9.10", "127.8.9.10 is a loopback address"),
    ("::1", "::1 is a loopback address"),
    ("10.1.2.3", "10.1.2.3 is a private address"),
    ("172.16.0.1", "172.16.0.1 is a private address"),
    ("192.168.1.1", "192.168.1.1 is a private address"),
    ("100.64.0.1", "100.64.0.1 is a private address"),
    ("fc00::1", "fc00::1 is a private address"),
    ("fd12:3456::1", "fd12:3456::1 is a private address"),
    ("fec0::1", "fec0::1 is a private address"),
    ("::ffff:10.0.0.1", "10.0.0.1 is a private address (inside ::ffff:a00:1)"),
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


@pytest.mark.parametrize(("address", "why"), ALWAYS_REFUSED, ids=[a for a, _ in ALWAYS_REFUSED])
@pytest.mark.parametrize("allow_private", [False, True], ids=["default", "private-allowed"])
def test_link_local_metadata_and_unroutable_addresses_are_always_refused(
    address: str, why: str, allow_private: bool
) -> None:
    assert webhook_rules.address_refusal(ip_address(address), allow_private=allow_private) == why


@pytest.mark.parametrize(("address", "why"), PRIVATE, ids=[a for a, _ in PRIVATE])
def test_loopback_and_private_addresses_are_refused_unless_allowed(address: str, why: str) -> None:
    assert webhook_rules.address_refusal(ip_address(address), allow_private=False) == why
    assert webhook_rules.address_refusal(ip_address(address), allow_private=True) is None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_accepted(address: str) -> None:
    assert webhook_rules.address_refusal(ip_address(address), allow_private=False) is None


def test_a_name_with_one_refused_address_among_public_ones_is_refused() -> None:
    addresses = [ip_address("93.184.216.34"), ip_address("169.254.169.254")]

    refusal = webhook_rules.addresses_refusal(addresses, allow_private=True)

    assert refusal == "169.254.169.254 is a cloud metadata address"
    assert (
        webhook_rules.addresses_refusal([], allow_private=True) == "the host resolves to no address"
    )


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/x", "Only http and https URLs are allowed."),
        ("file:///etc/passwd", "Only http and https URLs are allowed."),
        ("gopher://example.com/", "Only http and https URLs are allowed."),
        ("example.com/hook", "Only http and https URLs are allowed."),
        (
            "http://user:pw@example.com/",
            "A user name or password in the URL is not allowed (the signature authenticates).",
        ),
        (
            "http://example.com@169.254.169.254/",
            "A user name or password in the URL is not allowed (the signature authenticates).",
        ),
        ("http:///path", "The URL has no host."),
        ("http://exa mple.com/", "The URL contains spaces or control characters."),
        ("http://example.com/\r\nX: y", "The URL contains spaces or control characters."),
        ("http://example.com:99999/", "The URL cannot be read: Port out of range 0-65535."),
        ("http://example.com:0/", "Port 0 is not a port."),
        ("https://" + "a" * 2000 + ".com/", "The URL is longer than 2000 characters."),
    ],
)
def test_urls_that_are_not_http_targets_are_refused(url: str, why: str) -> None:
    with pytest.raises(webhook_rules.TargetRefused) as refused:
        webhook_rules.parse_target(url)

    assert str(refused.value) == why


@pytest.mark.parametrize(
    ("url", "target", "host_header", "connect_to"),
    [
        (
            "https://Hooks.Slack.com/services/T0/B0/XyZ",
            webhook_rules.Target("https", "hooks.slack.com", 443, "/services/T0/B0/XyZ"),
            "hooks.slack.com",
            "https://93.184.216.34:443/services/T0/B0/XyZ",
        ),
        (
            "http://[::1]:8080/hook?team=ops#frag",
            webhook_rules.Target("http", "::1", 8080, "/hook?team=ops"),
            "[::1]:8080",
            "http://93.184.216.34:8080/hook?team=ops",
        ),
        (
            "http://example.com",
            webhook_rules.Target("http", "example.com", 80, "/"),
            "example.com",
            "http://93.184.216.34:80/",
        ),
    ],
)
def test_a_target_connects_to_the_checked_address_and_names_its_host(
    url: str, target: webhook_rules.Target, host_header: str, connect_to: str
) -> None:
    parsed = webhook_rules.parse_target(url)

    assert parsed == target
    assert parsed.host_header == host_header
    assert parsed.url_for(ip_address("93.184.216.34")) == connect_to


# --- bodies and signature -----------------------------------------------------------------

MESSAGE = webhook_rules.Message(
    delivery_id="5b0f3c1e-9a53-4d4e-8f0e-2f7c3b0f9a11",
    event_id="plan:claude-max-1#1",
    kind=Kind.PLAN_EXHAUSTED,
    occurred_at=T0,
    summary="Plan connection claude-max-1 dropped out: <!channel> & more.",
    details={"connection_id": "claude-max-1"},
)


def test_the_json_body_carries_the_delivery_id_and_the_event() -> None:
    document: dict[str, Any] = json.loads(webhook_rules.json_body(MESSAGE))

    assert document == {
        "id": "5b0f3c1e-9a53-4d4e-8f0e-2f7c3b0f9a11",
        "event_id": "plan:claude-max-1#1",
        "kind": "plan_exhausted",
        "title": "Plan connection dropped out",
        "summary": "Plan connection claude-max-1 dropped out: <!channel> & more.",
        "occurred_at": "2026-11-29T12:00:00+00:00",
        "details": {"connection_id": "claude-max-1"},
        "test": False,
        "source": "omniroute-admin",
        "dashboard_url": None,
        "recovers_at": None,
    }


LINKED = webhook_rules.Message(
    delivery_id="5b0f3c1e-9a53-4d4e-8f0e-2f7c3b0f9a11",
    event_id="plan:claude-max-1#1",
    kind=Kind.PLAN_EXHAUSTED,
    occurred_at=T0,
    summary="Plan connection claude-max-1 dropped out: 1 % left.",
    details={"connection_id": "claude-max-1", "reset_at": "2026-11-29T17:00:00+00:00"},
    dashboard_url="https://omniroute.example.com/connections/claude-max-1/",
)


def test_a_body_links_the_dashboard_and_says_when_the_subject_recovers() -> None:
    document: dict[str, Any] = json.loads(webhook_rules.json_body(LINKED))
    slack = json.loads(webhook_rules.slack_body(LINKED))

    assert (document["dashboard_url"], document["recovers_at"]) == (
        "https://omniroute.example.com/connections/claude-max-1/",
        "2026-11-29T17:00:00+00:00",
    )
    assert slack == {
        "text": "*OmniRoute: Plan connection dropped out*\n"
        "Plan connection claude-max-1 dropped out: 1 % left.\n"
        "Expected back: 2026-11-29 17:00 UTC\n"
        "In the dashboard: https://omniroute.example.com/connections/claude-max-1/"
    }


@pytest.mark.parametrize(
    ("kind", "details", "recovers_at"),
    [
        (
            Kind.PLAN_EXHAUSTED,
            {"reset_at": "2026-11-29T17:00:00+00:00"},
            "2026-11-29T17:00:00+00:00",
        ),
        (Kind.PLAN_EXHAUSTED, {"reset_at": None}, None),  # no reading says when
        (Kind.PLAN_LOW, {"reset_at": "2026-11-29T17:00:00+00:00"}, "2026-11-29T17:00:00+00:00"),
        (
            Kind.BUDGET_CROSSED,
            {"threshold_percent": 100, "window_end": "2026-12-01T00:00:00+00:00"},
            "2026-12-01T00:00:00+00:00",
        ),
        (
            Kind.BUDGET_CROSSED,
            {"threshold_percent": 80, "window_end": "2026-12-01T00:00:00+00:00"},
            None,
        ),
        (Kind.CREDENTIAL_REJECTED, {"connection_id": "x"}, None),  # waits for an operator
        (Kind.PLAN_BACK, {"reset_at": "2026-11-29T17:00:00+00:00"}, None),  # recovered
    ],
)
def test_the_expected_recovery_is_given_only_where_it_is_known(
    kind: Kind, details: dict[str, Any], recovers_at: str | None
) -> None:
    moment = webhook_rules.recovery_of(kind, details)

    assert (moment.isoformat() if moment is not None else None) == recovers_at


def test_the_slack_body_escapes_mentions_and_links() -> None:
    document = json.loads(webhook_rules.slack_body(MESSAGE))

    assert document == {
        "text": "*OmniRoute: Plan connection dropped out*\n"
        "Plan connection claude-max-1 dropped out: &lt;!channel&gt; &amp; more."
    }


def test_the_signature_is_hmac_sha256_of_the_timestamp_a_dot_and_the_raw_body() -> None:
    body = webhook_rules.json_body(MESSAGE)
    expected = hmac.new(b"whsec_test-secret", b"1795000000." + body, hashlib.sha256).hexdigest()

    headers = webhook_rules.signed_headers(MESSAGE, body, "whsec_test-secret", 1795000000, 2)

    assert headers == {
        "Content-Type": "application/json",
        "X-OmniRoute-Delivery": "5b0f3c1e-9a53-4d4e-8f0e-2f7c3b0f9a11",
        "X-OmniRoute-Event": "plan_exhausted",
        "X-OmniRoute-Attempt": "2",
        "X-OmniRoute-Timestamp": "1795000000",
        "X-OmniRoute-Signature": f"sha256={expected}",
    }


@pytest.mark.parametrize(
    ("secret", "timestamp", "body", "now", "is_valid"),
    [
        pytest.param("whsec_right-secret", "1795000000", b'{"a":1}', 1795000100, True, id="good"),
        pytest.param("whsec_wrong-secret", "1795000000", b'{"a":1}', 1795000100, False, id="key"),
        pytest.param("whsec_right-secret", "1795000000", b'{"a":2}', 1795000100, False, id="body"),
        pytest.param("whsec_right-secret", "1795000001", b'{"a":1}', 1795000100, False, id="time"),
        pytest.param(
            "whsec_right-secret", "1795000000", b'{"a":1}', 1795000301, False, id="replayed-late"
        ),
        pytest.param("whsec_right-secret", "-1", b'{"a":1}', 1795000100, False, id="not-a-number"),
    ],
)
def test_a_receiver_accepts_only_a_matching_recent_signature(
    secret: str, timestamp: str, body: bytes, now: int, is_valid: bool
) -> None:
    signed = webhook_rules.signature("whsec_right-secret", 1795000000, b'{"a":1}')

    assert (
        webhook_rules.verify_signature(
            secret, timestamp_header=timestamp, signature_header=signed, body=body, now_unix=now
        )
        is is_valid
    )


# --- retries ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "is_refused", "attempt", "verdict"),
    [
        (200, False, 1, webhook_rules.Verdict.DELIVERED),
        (204, False, 6, webhook_rules.Verdict.DELIVERED),
        (None, False, 1, webhook_rules.Verdict.RETRY),
        (503, False, 5, webhook_rules.Verdict.RETRY),
        (429, False, 2, webhook_rules.Verdict.RETRY),
        (408, False, 2, webhook_rules.Verdict.RETRY),
        (None, False, 6, webhook_rules.Verdict.GIVE_UP),
        (500, False, 6, webhook_rules.Verdict.GIVE_UP),
        (302, False, 1, webhook_rules.Verdict.GIVE_UP),
        (404, False, 1, webhook_rules.Verdict.GIVE_UP),
        (401, False, 1, webhook_rules.Verdict.GIVE_UP),
        (None, True, 1, webhook_rules.Verdict.GIVE_UP),
    ],
)
def test_which_answers_are_tried_again(
    status: int | None, is_refused: bool, attempt: int, verdict: webhook_rules.Verdict
) -> None:
    assert (
        webhook_rules.attempt_verdict(
            status, is_refused=is_refused, attempt=attempt, max_attempts=6
        )
        is verdict
    )


def test_six_tries_wait_about_thirty_minutes_in_doubling_steps() -> None:
    delays = [
        webhook_rules.retry_delay_seconds(n, base_seconds=60, max_seconds=960) for n in range(1, 6)
    ]

    assert delays == [60.0, 120.0, 240.0, 480.0, 960.0]
    assert sum(delays) == 1860.0
    assert webhook_rules.retry_delay_seconds(9, base_seconds=60, max_seconds=960) == 960.0


def test_the_rules_module_imports_no_django_and_does_no_io() -> None:
    import ast
    import subprocess
    import sys

    code = (
        "import sys, ladder.core.notifications, ladder.core.webhooks; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'httpx', 'socket', 'celery', 'ladder') ))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout

    loaded = ast.literal_eval(output.strip())
    assert [m for m in loaded if not (m == "ladder" or m.startswith("ladder.core"))] == []
    assert "ladder.core.notifications" in loaded


def test_the_verification_snippet_in_the_docs_accepts_a_signed_body_and_nothing_else() -> None:
    import re
    import time
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[3] / "docs" / "NOTIFICATIONS.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", docs, flags=re.DOTALL)
    namespace: dict[str, Any] = {}
    exec(snippet, namespace)  # the operator-facing code, exactly as documented
    body = webhook_rules.json_body(MESSAGE)
    headers = webhook_rules.signed_headers(
        MESSAGE, body, "whsec_docs-secret-0000", int(time.time()), 1
    )

    assert namespace["is_authentic"]("whsec_docs-secret-0000", headers, body) is True
    assert namespace["is_authentic"]("whsec_docs-secret-0000", headers, body + b" ") is False
    assert namespace["is_authentic"]("whsec_other-secret-000", headers, body) is False


# --- plan_low: forecast to run out before the reset, once per window -----------------------

RESET_1 = at(4 * 3600)
RESET_2 = at(9 * 3600)


def low(
    seconds: float,
    reset_at: datetime = RESET_1,
    *,
    before_reset: bool = True,
    has_run_out: bool = False,
    runs_out_in: float = 3600,
) -> Observation:
    return Observation(
        now=at(seconds),
        forecasts=[
            rules.ForecastObservation(
                connection_id="claude-max-1",
                runs_out_at=at(seconds + runs_out_in),
                reset_at=reset_at,
                before_reset=before_reset,
                has_run_out=has_run_out,
                paid_until_reset_usd=Decimal("3.10"),
                paid_by_rung={"premium": Decimal("0.00"), "cheap": Decimal("3.10")},
                basis="from 7 readings over the last 52 min",
                sentence="claude-max-1 runs out in about 1 h, 3 h before its reset; at the "
                "current mix the cheap rung takes about $3.10 until then.",
            )
        ],
    )


def test_plan_low_is_sent_once_per_window_however_the_forecast_wavers() -> None:
    steps = run_script(
        [
            low(0),
            low(30),  # still low: nothing
            low(60, before_reset=False),  # the pace slowed: nothing taken back
            low(90),  # low again in the same window: nothing
            low(120, RESET_1 + timedelta(seconds=1.9)),  # the reset jittered: same window
            low(5 * 3600, RESET_2),  # the next window: told again
        ]
    )

    assert steps == [
        [("plan_low", "low:claude-max-1#1", at(0))],
        [],
        [],
        [],
        [],
        [("plan_low", "low:claude-max-1#2", at(5 * 3600))],
    ]


@pytest.mark.parametrize(
    "observed",
    [
        pytest.param(low(0, before_reset=False), id="the-reset-comes-first"),
        pytest.param(low(0, has_run_out=True, runs_out_in=-60), id="already-run-out"),
    ],
)
def test_plan_low_is_not_sent_when_the_reset_comes_first_or_the_plan_ran_out(
    observed: Observation,
) -> None:
    assert run_script([observed]) == [[]]


def scoped_low(seconds: float, *scopes: tuple[str | None, datetime]) -> Observation:
    """The connection's forecast and each model scope's, all before their resets."""
    plain = low(seconds).forecasts[0]
    return Observation(
        now=at(seconds),
        forecasts=[
            replace(plain, model_scope=scope, reset_at=reset_at) for scope, reset_at in scopes
        ],
    )


def test_plan_low_is_sent_once_per_window_of_each_model_scope() -> None:
    week_1, week_2 = at(3 * 86400), at(10 * 86400)
    steps = run_script(
        [
            scoped_low(0, (None, RESET_1), ("opus", week_1)),
            scoped_low(30, (None, RESET_1), ("opus", week_1), ("sonnet", week_1)),
            scoped_low(5 * 3600, (None, RESET_2), ("opus", week_1)),  # opus: the same week
            scoped_low(4 * 86400, ("opus", week_2)),  # opus's next week: told again
        ]
    )

    assert steps == [
        [("plan_low", "low:claude-max-1#1", at(0)), ("plan_low", "low:claude-max-1/opus#1", at(0))],
        [("plan_low", "low:claude-max-1/sonnet#1", at(30))],
        [("plan_low", "low:claude-max-1#2", at(5 * 3600))],
        [("plan_low", "low:claude-max-1/opus#2", at(4 * 86400))],
    ]


def test_a_scopes_plan_low_names_its_scope_in_the_details() -> None:
    (transition,) = rules.evaluate({}, scoped_low(0, ("opus", RESET_1))).transitions

    assert transition.subject == "low:claude-max-1/opus"
    assert transition.details["model_scope"] == "opus"


def test_plan_low_carries_the_forecast_in_its_details_and_summary() -> None:
    (transition,) = rules.evaluate({}, low(0)).transitions

    assert transition.summary == (
        "claude-max-1 runs out in about 1 h, 3 h before its reset; at the current mix the "
        "cheap rung takes about $3.10 until then. Forecast from 7 readings over the last 52 min."
    )
    assert transition.details == {
        "connection_id": "claude-max-1",
        "model_scope": None,
        "runs_out_at": "2026-11-29T13:00:00+00:00",
        "reset_at": "2026-11-29T16:00:00+00:00",
        "before_reset": True,
        "paid_until_reset_usd": 3.1,
        "paid_by_rung": {"cheap": 3.1, "premium": 0.0},
        "basis": "from 7 readings over the last 52 min",
    }
    assert transition.kind.headline == "Plan connection forecast to run out before its reset"
