"""`python manage.py first_run`: what `make run` does once on a new checkout, so a
newcomer lands in a working dashboard. Running it again changes nothing."""

from __future__ import annotations

import os
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
        # The world first, the password last: it is the one line a newcomer must not miss.
        if not Connection.objects.exists():
            call_command("seed_demo", with_spend=True, stdout=self.stdout)
        if not User.objects.filter(username=DEMO_USERNAME).exists():
            password = secrets.token_urlsafe(12)
            user = User.objects.create_user(DEMO_USERNAME, password=password)
            user.groups.add(Group.objects.get(name="operator"))
            port = os.environ.get("RUN_PORT", "8000")
            self.stdout.write(
                "\nA local demo operator account was created (shown only this once):\n"
                f"    username: {DEMO_USERNAME}\n    password: {password}\n"
                f"Sign in at http://127.0.0.1:{port}/accounts/login/. Lost it? Set a new one\n"
                f"with `.venv/bin/python manage.py changepassword {DEMO_USERNAME}`. For real\n"
                "accounts run `.venv/bin/python manage.py createsuperuser`, then add users to\n"
                "the `viewer` or `operator` group in /admin/.\n"
            )
