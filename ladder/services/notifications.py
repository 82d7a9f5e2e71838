"""Notifications, the shell: observe the ladder through the public services, keep what
was last notified in the database and create one delivery per (webhook, transition). The
rules are pure and live in `ladder/core/notifications.py`; webhooks and the sending of
deliveries are in `ladder/services/webhooks.py`; the Celery tasks that call this are in
`ladder/tasks.py`. See docs/NOTIFICATIONS.md."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from billing import services as billing_services
from billing.classify import Billing
from ladder import services
from ladder.core import SUBSCRIPTION_AUTO_ID, Rung
from ladder.core import notifications as rules
from ladder.models import Connection, NotificationDelivery, NotificationState, Webhook
from ladder.services import enqueue

logger = logging.getLogger(__name__)

# The row every evaluator locks first, so two evaluators never compare the same state.
LOCK_SUBJECT = "__evaluator__"
# A pending delivery this far past its due time has lost its task message (a broker
# restart, a failed enqueue): the beat enqueues it again. The re-check under the row lock
# makes a second message for the same delivery harmless.
OVERDUE_AFTER = timedelta(seconds=60)


def clock() -> datetime:
    """The shell's clock (a seam: tests pin it)."""
    return timezone.now()


# --- observing and evaluating -------------------------------------------------------------


def observe(now: datetime) -> rules.Observation:
    """What the rules look at, through the ladder's public services (a fixed number of
    queries: settings, reading health, spend, the subscription decision, connections,
    the plans' forecasts)."""
    config = services.load_config()
    health = services.reading_health(now=now)
    spend = services.spend_summary(now=now)
    decision = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=now)
    reasons: dict[str, str] = {}
    for exclusion in decision.excluded:
        reasons.setdefault(exclusion.connection_id, exclusion.reason.value)
    counts: dict[str, int] = {}
    for reason in reasons.values():
        counts[reason] = counts.get(reason, 0) + 1
    catalog = billing_services.load_catalog()
    plans: list[rules.PlanObservation] = []
    rejected: list[rules.CredentialObservation] = []
    metering: list[rules.MeteringObservation] = []
    for (
        connection_id,
        provider,
        auth_type,
        state,
        since,
        why,
        quota_error,
        stored_evidence,
        reset_at,
    ) in Connection.objects.filter(is_active=True).values_list(
        "connection_id",
        "provider",
        "auth_type",
        "hysteresis_state",
        "hysteresis_since",
        "hysteresis_reason",
        "quota_error",
        "overage_evidence",
        "current_reading__reset_at",
    ):
        if catalog.classify(provider, auth_type).billing is Billing.SUBSCRIPTION:
            plans.append(
                rules.PlanObservation(
                    connection_id, state == "dropped_out", since, why, reset_at=reset_at
                )
            )
            evidence = services.evidence_of(stored_evidence)
            if evidence is not None:
                metering.append(
                    rules.MeteringObservation(
                        connection_id,
                        evidence.says == "can_meter",
                        evidence.detail,
                        evidence.source,
                        evidence.seen_at,
                    )
                )
        if quota_error:
            rejected.append(rules.CredentialObservation(connection_id, quota_error))
    budgets = [
        rules.BudgetObservation(
            rung=rung,
            spent_usd=budget.spent_usd,
            budget_usd=budget.budget_usd,
            budget_window=spend.budget_window,
            window_start=spend.window_start,
            window_end=spend.window_end,
        )
        for rung, budget in spend.rungs.items()
    ]
    forecasts = [
        rules.ForecastObservation(
            connection_id=item.connection_id,
            runs_out_at=made.runs_out_at,
            reset_at=made.reset_at,
            before_reset=made.before_reset,
            has_run_out=made.has_run_out,
            paid_until_reset_usd=made.paid_until_reset_usd,
            paid_by_rung={rung.label: usd for rung, usd in made.paid_by_rung},
            basis=made.basis,
            sentence=sentence,
            model_scope=scope,
        )
        for item in services.plan_forecasts(
            now=now,
            config=config,
            window_spent={Rung.from_label(rung): b.spent_usd for rung, b in spend.rungs.items()},
        )
        # The connection's binding window, then each model scope's (its own plan_low).
        for scope, made, sentence in (
            (None, item.forecast, item.sentence),
            *((scoped.model_scope, scoped.forecast, scoped.sentence) for scoped in item.scopes),
        )
        if made.runs_out_at is not None
    ]
    return rules.Observation(
        now=now,
        newest_polled_reading_at=health.newest_polled_reading_at,
        max_state_age_seconds=config.max_state_age_seconds,
        subscription_is_empty=not decision.candidates,
        subscription_reasons=counts,
        subscription_empty_after=timedelta(seconds=settings.NOTIFY_SUBSCRIPTION_EMPTY_SECONDS),
        plans=plans,
        rejected_credentials=rejected,
        budgets=budgets,
        forecasts=forecasts,
        metering=metering,
    )


def _notified(row: NotificationState) -> rules.Notified:
    return rules.Notified(row.status, row.since, row.sequence, row.scope)


def _lock_evaluator(now: datetime) -> None:
    """Serialise evaluators: each holds this row's lock until its transaction ends."""
    NotificationState.objects.select_for_update().get_or_create(
        subject=LOCK_SUBJECT, defaults={"status": "lock", "updated_at": now}
    )


def evaluate_notifications(*, now: datetime | None = None) -> list[str]:
    """Observe, compare with what was last notified, store the new states and create a
    delivery per (subscribed active webhook, transition), all in one transaction; the
    deliveries are enqueued once it commits. Returns the new delivery ids."""
    now = now or clock()
    with transaction.atomic():
        _lock_evaluator(now)
        observed = observe(now)
        previous = {
            row.subject: _notified(row)
            for row in NotificationState.objects.exclude(subject=LOCK_SUBJECT)
        }
        evaluation = rules.evaluate(previous, observed)
        for subject, state in evaluation.changes.items():
            NotificationState.objects.update_or_create(
                subject=subject,
                defaults={
                    "status": state.status,
                    "since": state.since,
                    "sequence": state.sequence,
                    "scope": state.scope,
                    "updated_at": now,
                },
            )
        created = _create_deliveries(evaluation.transitions, now)
        _enqueue_on_commit(created)
    for transition in evaluation.transitions:
        logger.info("notification %s: %s", transition.key, transition.kind.value)
    return created


def _create_deliveries(transitions: Sequence[rules.Transition], now: datetime) -> list[str]:
    if not transitions:
        return []
    webhooks = list(Webhook.objects.filter(is_active=True))
    created: list[str] = []
    for transition in transitions:
        for webhook in webhooks:
            if transition.kind.value not in webhook.kinds:
                continue
            try:
                # The unique (webhook, event_key) constraint is the last line of dedupe:
                # a transition already delivered to this webhook is never queued again.
                with transaction.atomic():
                    delivery = NotificationDelivery.objects.create(
                        delivery_id=uuid.uuid4(),
                        webhook=webhook,
                        webhook_name=webhook.name,
                        event_key=transition.key,
                        kind=transition.kind.value,
                        summary=transition.summary[:1000],
                        details=dict(transition.details),
                        occurred_at=transition.at,
                        created_at=now,
                        next_attempt_at=now,
                    )
            except IntegrityError:
                continue
            created.append(str(delivery.delivery_id))
    return created


def _enqueue(delivery_id: str) -> None:
    try:
        enqueue.send_delivery(delivery_id)
    except Exception as error:  # kombu raises several types; all mean "not queued"
        # Not lost: the beat finds the overdue delivery and enqueues it again.
        logger.warning("could not enqueue notification %s: %s", delivery_id, type(error).__name__)


def _enqueue_on_commit(delivery_ids: Sequence[str]) -> None:
    def enqueue_all() -> None:
        for delivery_id in delivery_ids:
            _enqueue(delivery_id)

    if delivery_ids:
        transaction.on_commit(enqueue_all)


def requeue_overdue_deliveries(*, now: datetime | None = None) -> list[str]:
    """Enqueue again every delivery whose task message was lost: pending and overdue, or
    sending past its lease (its worker died mid-attempt)."""
    now = now or clock()
    overdue = list(
        NotificationDelivery.objects.filter(
            Q(status=NotificationDelivery.Status.PENDING, next_attempt_at__lte=now - OVERDUE_AFTER)
            | Q(status=NotificationDelivery.Status.SENDING, lease_until__lte=now)
        )
        .order_by("next_attempt_at")
        .values_list("delivery_id", flat=True)[:500]
    )
    ids = [str(delivery_id) for delivery_id in overdue]
    for delivery_id in ids:
        _enqueue(delivery_id)
    return ids
