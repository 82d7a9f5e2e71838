"""`python manage.py import_prices FILE`: load a model_prices_and_context_window.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing import services
from billing.price_import import PriceFileError, parse_price_file


class Command(BaseCommand):
    help = (
        "Load model prices from a model_prices_and_context_window.json file (chat models only). "
        "Idempotent; a malformed file changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="SOURCE=PROVIDER",
            help="Rename a litellm_provider to this gateway's provider id, e.g. anthropic=claude.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        provider_map: dict[str, str] = {}
        for pair in options["map"]:
            source, sep, target = pair.partition("=")
            if not sep or not source.strip() or not target.strip():
                raise CommandError(f"--map takes SOURCE=PROVIDER, got {pair!r}")
            provider_map[source.strip()] = target.strip()
        path: Path = options["file"]
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise CommandError(f"Cannot read {path}: {error.strerror or error}") from error
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise CommandError(f"{path} is not valid JSON: {error}") from error
        try:
            parsed = parse_price_file(data, provider_map)
        except PriceFileError as error:
            raise CommandError(f"{path}: {error}. Nothing was imported.") from error
        counts = services.import_prices(parsed, actor="import_prices")
        self.stdout.write(
            f"created {counts.created}, updated {counts.updated}, "
            f"unchanged {counts.unchanged}, skipped {counts.skipped}"
        )
