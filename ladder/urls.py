"""Dashboard URLs of the ladder. Pages are GETs (query parameters select an edit or
confirm state, so every state has a real URL); every write is a POST to its own URL."""

from django.urls import path, register_converter

from ladder import views


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
    path("", views.overview, name="overview"),
    path("connections/", views.connections, name="connections"),
    # Before the connection pages: "add" is also a valid connection id, whose page this
    # URL still shows on a GET.
    path("connections/add/", views.connection_add_or_page, name="connection-add"),
    path("connections/<connection_id:connection_id>/", views.connection_detail, name="connection"),
    path(
        "connections/<connection_id:connection_id>/refresh/",
        views.refresh_connection,
        name="connection-refresh",
    ),
    path(
        "connections/<connection_id:connection_id>/edit/",
        views.connection_edit,
        name="connection-edit",
    ),
    path(
        "connections/<connection_id:connection_id>/delete/",
        views.connection_delete,
        name="connection-delete",
    ),
    path("pools/", views.pools, name="pools"),
    path("reports/simulation/", views.simulation_report, name="simulation-report"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/update/", views.settings_update, name="settings-update"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/create/", views.token_create, name="token-create"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
    path("notifications/", views.notifications_page, name="notifications"),
    path("notifications/webhooks/create/", views.webhook_create, name="webhook-create"),
    path(
        "notifications/webhooks/<int:webhook_id>/update/",
        views.webhook_update,
        name="webhook-update",
    ),
    path(
        "notifications/webhooks/<int:webhook_id>/delete/",
        views.webhook_delete,
        name="webhook-delete",
    ),
    path("notifications/webhooks/<int:webhook_id>/test/", views.webhook_test, name="webhook-test"),
    path(
        "notifications/webhooks/<int:webhook_id>/rotate-secret/",
        views.webhook_rotate_secret,
        name="webhook-rotate-secret",
    ),
    path("accounts/login/", views.login, name="login"),
    path("accounts/logout/", views.logout, name="logout"),
]
