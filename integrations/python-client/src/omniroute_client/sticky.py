"""Soft stickiness: keep a conversation on the connection that served it last.

Prompt caches are per account: a conversation that moves between accounts pays its whole
context again. The control plane lists an entry's plan connections in order of preference
(the capacity that expires soonest first) and a gateway enforces the list as a set, so it
may keep a conversation on the connection it used last **while that connection stays in
the entry's allowed list** (spec/ladder.md, "Which plan connection first"). This module
does exactly that, and nothing more:

- the connection used last goes first in an entry of the same rung that still lists it;
  otherwise the entry keeps the control plane's order (its first);
- never across rungs: a conversation last served on a paid rung goes back to the plan the
  moment the plan is back (the entries are never reordered, only the connections inside
  one entry), and a key remembered on one rung never jumps the order of another;
- a conversation whose connection left every entry of its rung is forgotten;
- a bounded map: at most `max_conversations` (the least recently used go first), each
  forgotten `ttl_seconds` after its last use.

No round trip, no IO: a dictionary lookup under a lock per request that has a key.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# Request headers that name a conversation, most specific first: Claude Code's session
# (v2.1.86 and later), the Codex CLI's session (hyphenated, then the older underscore
# form), then generic ones.
SESSION_HEADERS = (
    "x-claude-code-session-id",
    "session-id",
    "session_id",
    "x-session-id",
    "conversation-id",
    "conversation_id",
)
# Keys of LiteLLM's `metadata` that name a conversation, first match wins.
METADATA_KEYS = ("omniroute_conversation", "conversation_id", "session_id")
# A key longer than this is cut (a conversation id is a UUID or so; the map stays small).
MAX_KEY_LENGTH = 256


def _text(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (str, int)):
        text = str(value).strip()
        return text[:MAX_KEY_LENGTH] or None
    return None


def _header(headers: Mapping[str, Any] | None) -> str | None:
    if not headers:
        return None
    try:
        lowered = {str(name).lower(): value for name, value in headers.items()}
    except AttributeError:
        return None
    for name in SESSION_HEADERS:
        found = _text(lowered.get(name))
        if found is not None:
            return f"{name}:{found}"
    return None


def _claude_user_id_session(metadata: Mapping[str, Any]) -> str | None:
    # Claude Code before the session header put `{"session_id": ...}` as JSON in the
    # Anthropic request's `metadata.user_id`.
    user_id = metadata.get("user_id")
    if not isinstance(user_id, str) or "session_id" not in user_id:
        return None
    try:
        parsed = json.loads(user_id)
    except ValueError:
        return None
    return _text(parsed.get("session_id")) if isinstance(parsed, dict) else None


def conversation_key(
    *,
    explicit: object = None,
    metadata: Mapping[str, Any] | None = None,
    headers: Mapping[str, Any] | None = None,
    prompt_cache_key: object = None,
) -> str | None:
    """The conversation a request belongs to, from the first source that names one: an
    explicit argument; LiteLLM's `metadata` (`omniroute_conversation`, `conversation_id`,
    `session_id`, or Claude Code's `user_id` JSON with a `session_id`); a session header
    (`SESSION_HEADERS`); OpenAI's `prompt_cache_key`. None: no key (no stickiness).

    Each source is prefixed, so two sources never name one conversation by accident."""
    found = _text(explicit)
    if found is not None:
        return f"explicit:{found}"
    if metadata:
        for name in METADATA_KEYS:
            found = _text(metadata.get(name))
            if found is not None:
                return f"metadata.{name}:{found}"
        found = _claude_user_id_session(metadata)
        if found is not None:
            return f"metadata.user_id:{found}"
    found = _header(headers)
    if found is not None:
        return found
    found = _text(prompt_cache_key)
    if found is not None:
        return f"prompt_cache_key:{found}"
    return None


def entry_connections(entry: Mapping[str, Any]) -> list[str]:
    """The connections a decision entry may dispatch to, in the control plane's order."""
    pinned = entry.get("connection_id")
    if pinned:
        return [str(pinned)]
    return [str(c) for c in entry.get("allowed_connection_ids") or ()]


class StickyConnections:
    """Conversation -> (rung, connection it used last): a bounded map with expiry,
    safe to share between threads."""

    def __init__(
        self,
        *,
        max_conversations: int = 10_000,
        ttl_seconds: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_conversations < 1:
            raise ValueError("max_conversations must be at least 1")
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self.max_conversations = max_conversations
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self._lock = threading.Lock()
        # conversation -> (rung, connection_id, expires at); oldest use first.
        self._last: OrderedDict[str, tuple[str | None, str, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._last)

    def last(self, conversation: str) -> tuple[str | None, str] | None:
        """The (rung, connection) the conversation used last; None when unknown or expired."""
        with self._lock:
            return self._live(conversation, self.clock())

    def _live(self, conversation: str, now: float) -> tuple[str | None, str] | None:
        record = self._last.get(conversation)
        if record is None:
            return None
        if record[2] <= now:
            del self._last[conversation]
            return None
        return record[0], record[1]

    def remember(self, conversation: str | None, rung: str | None, connection_id: str) -> None:
        """The conversation was served by this connection on this rung."""
        if conversation is None:
            return
        with self._lock:
            now = self.clock()
            last = self._last
            last[conversation] = (rung, connection_id, now + self.ttl_seconds)
            last.move_to_end(conversation)
            while len(last) > self.max_conversations:
                last.popitem(last=False)
            # Expired records at the old end go on every write: the map holds only live ones
            # beyond the bound's worth.
            while last:
                oldest = next(iter(last.values()))
                if oldest[2] > now:
                    break
                last.popitem(last=False)

    def forget(self, conversation: str) -> None:
        with self._lock:
            self._last.pop(conversation, None)

    def prefer(
        self, conversation: str | None, entries: Sequence[Mapping[str, Any]]
    ) -> Sequence[Mapping[str, Any]]:
        """A whole decision's entries with the conversation's last connection first inside
        each entry of its rung that still lists it; the entries themselves in their order.
        A conversation whose connection is in no entry of its rung is forgotten (dropped
        the moment it leaves the list). No key, nothing known: the entries as given."""
        return self._prefer(conversation, entries, drop=True)

    def order(self, conversation: str | None, entry: Mapping[str, Any]) -> list[str]:
        """One entry's connections in the order to try them for this conversation (the
        record is kept whatever this entry holds: only `prefer`, which sees the whole
        decision, can tell that a connection left its rung)."""
        return entry_connections(self._prefer(conversation, [entry], drop=False)[0])

    def _prefer(
        self, conversation: str | None, entries: Sequence[Mapping[str, Any]], *, drop: bool
    ) -> Sequence[Mapping[str, Any]]:
        if conversation is None:
            return entries
        with self._lock:
            found = self._live(conversation, self.clock())
            if found is None:
                return entries
            rung, sticky = found
            listed = any(
                entry.get("rung") == rung and sticky in entry_connections(entry)
                for entry in entries
            )
            if not listed:
                if drop:
                    del self._last[conversation]
                return entries
        preferred: list[Mapping[str, Any]] = []
        for entry in entries:
            allowed = entry.get("allowed_connection_ids")
            if entry.get("rung") == rung and allowed and sticky in allowed and allowed[0] != sticky:
                entry = {
                    **entry,
                    "allowed_connection_ids": [sticky, *(c for c in allowed if c != sticky)],
                }
            preferred.append(entry)
        return preferred
