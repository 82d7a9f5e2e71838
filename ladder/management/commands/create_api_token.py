"""`python manage.py create_api_token NAME --scope gateway|operator`: prints the token
alone on stdout (it is shown only this once)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ladder.models import ApiToken
from ladder.tokens import create_token


class Command(BaseCommand):
    help = "Create an API token and print it alone on stdout (it cannot be shown again)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--scope", required=True, choices=ApiToken.Scope.values)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            _, secret = create_token(options["name"], options["scope"], created_by="cli")
        except ValueError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(secret)
