"""Dashboard URLs of the ladder. Pages are GETs (query parameters select an edit or
confirm state, so every state has a real URL); every write is a POST to its own URL."""

from django.urls import path, register_converter

from ladder.web import (
    audit,
    auth,
    candidates,
    connections,
    ledger_replays,
    notifications,
    overview,
    pools,
    reports,
    settings,
    spend,
    timeline,
    tokens,
)


class ConnectionIdConverter:
    """A connection id as the API defines it; anything else (a NUL, which PostgreSQL
    refuses) matches no URL, so it is a 404 and never a lookup."""

    regex = r"[A-Za-z0-9._:@-]{1,128}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ConnectionIdConverter, "connection_id")

app_name = "ladder"
urlpatterns = [
    path("", overview.overview, name="overview"),
    path("connections/", connections.connections, name="connections"),
    # Before the connection pages: "add" is also a valid connection id, whose page this
    # URL still shows on a GET.
    path("connections/add/", connections.connection_add_or_page, name="connection-add"),
    path(
        "connections/<connection_id:connection_id>/",
        connections.connection_detail,
        name="connection",
    ),
    path(
        "connections/<connection_id:connection_id>/refresh/",
        connections.refresh_connection,
        name="connection-refresh",
    ),
    path(
        "connections/<connection_id:connection_id>/edit/",
        connections.connection_edit,
        name="connection-edit",
    ),
    path(
        "connections/<connection_id:connection_id>/delete/",
        connections.connection_delete,
        name="connection-delete",
    ),
    path("candidates/", candidates.candidates, name="candidates"),
    path("candidates/add/", candidates.candidate_add, name="candidate-add"),
    path("candidates/<int:candidate_id>/", candidates.candidate_detail, name="candidate"),
    path("candidates/<int:candidate_id>/edit/", candidates.candidate_edit, name="candidate-edit"),
    path(
        "candidates/<int:candidate_id>/delete/",
        candidates.candidate_delete,
        name="candidate-delete",
    ),
    path("pools/", pools.pools, name="pools"),
    path("pools/timeline/", timeline.pool_timeline, name="pool-timeline"),
    path("spend/", spend.spend_page, name="spend"),
    path("spend/export.csv", spend.spend_csv, name="spend-csv"),
    path("reports/simulation/", reports.simulation_report, name="simulation-report"),
    path("reports/simulation/run/", reports.simulation_start, name="simulation-start"),
    path(
        "reports/simulation/runs/<int:run_id>/",
        reports.simulation_progress,
        name="simulation-progress",
    ),
    path(
        "reports/ledger-replays/run/",
        ledger_replays.ledger_replay_start,
        name="ledger-replay-start",
    ),
    path(
        "reports/ledger-replays/<int:run_id>/",
        ledger_replays.ledger_replay_page,
        name="ledger-replay",
    ),
    path(
        "reports/ledger-replays/<int:run_id>/export.csv",
        ledger_replays.ledger_replay_csv,
        name="ledger-replay-csv",
    ),
    path("audit/", audit.audit, name="audit"),
    path("settings/", settings.settings_page, name="settings"),
    path("settings/update/", settings.settings_update, name="settings-update"),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/create/", tokens.token_create, name="token-create"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token-revoke"),
    path("notifications/", notifications.notifications_page, name="notifications"),
    path("notifications/webhooks/create/", notifications.webhook_create, name="webhook-create"),
    path(
        "notifications/webhooks/<int:webhook_id>/update/",
        notifications.webhook_update,
        name="webhook-update",
    ),
    path(
        "notifications/webhooks/<int:webhook_id>/delete/",
        notifications.webhook_delete,
        name="webhook-delete",
    ),
    path(
        "notifications/webhooks/<int:webhook_id>/test/",
        notifications.webhook_test,
        name="webhook-test",
    ),
    path(
        "notifications/webhooks/<int:webhook_id>/rotate-secret/",
        notifications.webhook_rotate_secret,
        name="webhook-rotate-secret",
    ),
    path("accounts/login/", auth.login, name="login"),
    path("accounts/logout/", auth.logout, name="logout"),
]
