"""The URLconf: dashboard, Django admin, and the API."""

from django.contrib import admin
from django.urls import include, path

from omniroute_admin.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("", include("ladder.urls")),
]
