"""What every registered ModelAdmin shares: hostile list queries are refused before they
reach the database. PostgreSQL refuses a NUL in any text parameter with an error (a 500),
so a NUL anywhere in a list page's query string (search, filters, ordering) is treated
like any other bad lookup: Django's admin redirects to the list with `?e=1`."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.http import HttpRequest


def has_nul(request: HttpRequest) -> bool:
    """Whether any name or value of the query string carries a NUL."""
    return any(
        "\x00" in key or any("\x00" in value for value in values)
        for key, values in request.GET.lists()
    )


class GuardedModelAdmin(admin.ModelAdmin):
    """The base of every ModelAdmin this project registers (tests/billing/test_admin.py
    checks that each registered admin is one)."""

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        if has_nul(request):
            raise IncorrectLookupParameters("A NUL character in the query string.")
        return super().get_changelist_instance(request)
