"""Dashboard views of the billing app: the catalog (`catalog.py`), the model prices
(`prices.py`) and the provider aliases (`aliases.py`). Each state has a real URL, so the
pages work without JavaScript; access and response headers come from the dashboard kit's
decorators in `omniroute_admin.dashboard`. What the catalog's and the prices' pages share
is here."""

from __future__ import annotations

# The edit row and the create form share a page: distinct element ids for their fields.
EDIT_IDS = "edit-%s"
NEW_IDS = "new-%s"


def error_notice(message: str) -> dict[str, str]:
    """The page's notice of a write that did not happen."""
    return {"level": "error", "message": message}
