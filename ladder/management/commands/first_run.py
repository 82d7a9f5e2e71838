"""`python manage.py first_run`: what `make run` does once on a new checkout, so a
newcomer lands in a working dashboard. Running it again changes nothing."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand

from ladder.models import Connection

DEMO_USERNAME = "demo-operator"


class Command(BaseCommand):
    help = "Create the local demo operator account and the demo world, once."

    def handle(self, *args: Any, **options: Any) -> None:
        if not User.objects.filter(username=DEMO_USERNAME).exists():
            password = secrets.token_urlsafe(12)
            user = User.objects.create_user(DEMO_USERNAME, password=password)
            user.groups.add(Group.objects.get(name="operator"))
            self.stdout.write(
                "\nA local demo operator account was created (shown only this once):\n"
                f"    username: {DEMO_USERNAME}\n    password: {password}\n"
                "Sign in at http://127.0.0.1:8000/accounts/login/. For real accounts run\n"
                "`python manage.py createsuperuser`, then add users to the `viewer` or\n"
                "`operator` group in /admin/.\n"
            )
        if not Connection.objects.exists():
            call_command("seed_demo", with_spend=True, stdout=self.stdout)
