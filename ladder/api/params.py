"""What several gateway endpoints share: the connection id in a path, and a 404's body."""

from __future__ import annotations

from typing import Annotated

from ninja import Path

from ladder.schemas import CONNECTION_ID_REGEX

ConnectionIdPath = Annotated[
    str,
    Path(
        pattern=CONNECTION_ID_REGEX,
        description="The gateway's own connection id.",
        example="claude-max-1",
    ),
]


def detail(message: str) -> dict[str, str]:
    return {"detail": message}
