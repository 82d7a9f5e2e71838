"""The Django admin of dashboard accounts and roles. The roles are the two groups
`viewer` and `operator` (ladder/migrations/0003_roles.py), matched by name
(omniroute_admin.dashboard.role_of): renaming or deleting one would silently strip every
member of their role, and a new group or a group permission means nothing to the
dashboard. So
groups are read-only here. Users stay writable: this is where operators manage accounts
and set each user's role (its groups); Django's admin log records every such write, and
no pool decision reads a user, so no change counter is involved.

Nothing of the ladder itself (connections, readings, settings, candidates, spend,
tokens) is registered: it is written through the API and the dashboard only."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.http import HttpRequest

from omniroute_admin.admin_guards import GuardedModelAdmin

admin.site.unregister(Group)
admin.site.unregister(User)


@admin.register(Group)
class RoleGroupAdmin(GuardedModelAdmin, GroupAdmin):
    """The two roles, view only."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(User)
class AccountAdmin(GuardedModelAdmin, UserAdmin):
    """Django's own user admin, with hostile list queries refused."""
