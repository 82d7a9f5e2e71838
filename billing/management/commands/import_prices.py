"""`python manage.py import_prices FILE`: load a model_prices_and_context_window.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing import services
from billing.price_import import MAX_PRICE_FILE_BYTES, PriceFileError, parse_provider_map


class Command(BaseCommand):
    help = (
        "Load model prices from a model_prices_and_context_window.json file (chat models only). "
        "Idempotent; malformed rows are skipped and counted; a file that cannot be read "
        "changes nothing. Imported zero prices are stored as needing review."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="SOURCE=PROVIDER",
            help=(
                "Rename a litellm_provider to this gateway's provider id, e.g. "
                "mistral=my-mistral. The provider aliases (GET /api/v1/provider-aliases) "
                "apply first; --map covers the names no alias maps."
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            provider_map = parse_provider_map(options["map"], services.price_limits())
        except PriceFileError as error:
            raise CommandError(f"--map: {error} Nothing was imported.") from error
        path: Path = options["file"]
        try:
            if path.stat().st_size > MAX_PRICE_FILE_BYTES:
                raise CommandError(
                    f"{path} is larger than {MAX_PRICE_FILE_BYTES:,} bytes. Nothing was imported."
                )
            raw = path.read_bytes()
        except OSError as error:
            raise CommandError(f"Cannot read {path}: {error.strerror or error}") from error
        try:
            counts = services.import_price_file(raw, provider_map, actor="import_prices")
        except PriceFileError as error:
            raise CommandError(f"{path}: {error} Nothing was imported.") from error
        self.stdout.write(counts.summary())
