"""Dashboard URLs of the ladder. Pages are GETs (query parameters select an edit or
confirm state, so every state has a real URL); every write is a POST to its own URL."""

from django.urls import path

from ladder import views

app_name = "ladder"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("connections/", views.connections, name="connections"),
    path("connections/<str:connection_id>/", views.connection_detail, name="connection"),
    path(
        "connections/<str:connection_id>/refresh/",
        views.refresh_connection,
        name="connection-refresh",
    ),
    path("pools/", views.pools, name="pools"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/update/", views.settings_update, name="settings-update"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/create/", views.token_create, name="token-create"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
    path("accounts/login/", views.login, name="login"),
    path("accounts/logout/", views.logout, name="logout"),
]
