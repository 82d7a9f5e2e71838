"""The URLconf: dashboard, Django admin, the API and the operations endpoints."""

from django.contrib import admin
from django.urls import include, path

from ladder.web.login_throttle import ThrottledAdminAuthenticationForm
from omniroute_admin import ops
from omniroute_admin.api import api

# /admin/login/ is a sign-in page too: the same throttle and budget as /accounts/login/.
admin.site.login_form = ThrottledAdminAuthenticationForm

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("v1/models", ops.v1_models, name="v1-models"),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
    path("", include("billing.urls")),
    path("", include("ladder.urls")),
]

handler400 = "omniroute_admin.ops.bad_request"
handler404 = "omniroute_admin.ops.not_found"
handler500 = "omniroute_admin.ops.server_error"
