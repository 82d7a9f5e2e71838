"""The embedded broker: kombu's filesystem transport, made safe to read while written.

kombu's filesystem transport writes a message into its final file name: it opens the
file, then locks it, then writes. Its reader takes no lock, so a worker polling the
folder could move and read a file that was still empty, and kombu's JSON reader then
stopped the worker with `Unrecoverable error: JSONDecodeError` (seen 3 times in 5 hours
of `make run` on a loaded machine; 8 empty reads in 10,000 messages at a 0.1 s poll).

Here a message is written whole under a name the reader never takes (in the `writing`
folder beside the queue's), then renamed into the queue's folder: a rename within one
file system is atomic, so a reader sees a complete message or none. An exchange table
that another process is still creating reads as empty (no queue bound yet) instead of
stopping the process. `filesystem://` names this transport (omniroute_admin/celery.py).

Why this and not a database transport: it needs nothing installed, and each message is
one file that one worker takes by one rename (no shared lock, no "database is locked"
under a loaded machine); docs/OPERATIONS.md, "The embedded broker".
"""

from __future__ import annotations

import itertools
import os
import uuid
from time import monotonic_ns
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

WRITING_FOLDER = "writing"
# Names sort in the order written: kombu reads a folder in sorted name order. Zero-padded
# nanoseconds, then this process's own count for two puts within one clock tick.
_SEQUENCE = itertools.count()


class Channel(filesystem.Channel):
    """The filesystem channel whose messages appear in their folder only when whole."""

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{monotonic_ns():020d}_{next(_SEQUENCE):012d}_{uuid.uuid4()}.{queue}.msg"
        writing = os.path.join(self.data_folder_out, WRITING_FOLDER)
        partial = os.path.join(writing, name)
        try:
            os.makedirs(writing, exist_ok=True)
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc

    def get_table(self, exchange: str) -> Any:
        file = self._exchange_file(exchange)  # type: ignore[attr-defined]
        try:
            if file.stat().st_size == 0:  # being created by another process: none bound yet
                return []
        except FileNotFoundError:
            return []
        return super().get_table(exchange)


class Transport(filesystem.Transport):
    """kombu's filesystem transport with the channel above."""

    Channel = Channel
