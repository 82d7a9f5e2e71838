"""Log lines cannot be forged: control characters in anything logged are escaped.

A value from a request (a provider, an auth type, a path, a header) may hold CR, LF or
another line break; written raw, it would end the record and start a fake one. Every
handler in settings.LOGGING formats through `EscapingFormatter`; Celery's and gunicorn's
own handlers are wrapped in `EscapingWrapper` (see omniroute_admin/celery.py and
gunicorn.conf.py). Both escape, in the message and everything formatted into it:

- C0 controls (U+0000 to U+001F, tab included) and DEL, C1 controls (U+0080 to U+009F,
  NEL included) and the Unicode line and paragraph separators U+2028 and U+2029: written
  as ``\\r``, ``\\n``, ``\\t`` or ``\\xNN`` / ``\\uNNNN``.

A record's message is therefore one line. A traceback (or stack) keeps its lines, for
the people reading it, but every one of them starts with ``CONTINUATION``: no line an
exception's text brings in can pass for a record of its own.

No Django import here: gunicorn's master process loads this module before any app.
"""

from __future__ import annotations

import logging
import re

# Escaped as a pair: a line break, or any control character a terminal or a log
# shipper reads as one.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}
CONTINUATION = "  | "


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """Return text with every control character and line separator escaped."""
    return _CONTROL.sub(_escape_one, text)


def continuation_lines(text: str) -> str:
    """Return a multi-line text (a traceback) with its lines escaped and marked."""
    return "\n".join(CONTINUATION + escape_controls(line) for line in text.split("\n"))


def escaped_record(record: logging.LogRecord, formatter: logging.Formatter) -> logging.LogRecord:
    """Return a copy of record whose message and traceback are escaped, args applied."""
    copy = logging.makeLogRecord(record.__dict__)
    # getMessage() applies the args first, so an escaped value can never be re-read by a
    # format directive; the copy leaves the record other handlers see untouched.
    copy.msg = escape_controls(record.getMessage())
    copy.args = None
    copy.name = escape_controls(record.name)
    copy.exc_info = None
    copy.exc_text = None
    if record.exc_info:
        copy.exc_text = continuation_lines(formatter.formatException(record.exc_info))
    elif record.exc_text:
        copy.exc_text = continuation_lines(record.exc_text)
    if record.stack_info:
        copy.stack_info = continuation_lines(record.stack_info)
    return copy


class EscapingFormatter(logging.Formatter):
    """A logging.Formatter that writes every record as one escaped line (plus marked
    traceback lines), whatever its message, args or exception hold."""

    def format(self, record: logging.LogRecord) -> str:
        """Format an escaped copy of the record."""
        return super().format(escaped_record(record, self))

    def formatMessage(self, record: logging.LogRecord) -> str:
        """Escape the whole line: extra fields formatted into it are input too."""
        return escape_controls(super().formatMessage(record))


class EscapingWrapper(logging.Formatter):
    """Wraps another library's formatter (Celery's, gunicorn's) with the same escaping,
    keeping its format and colours."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        """Let the wrapped formatter format an escaped copy of the record."""
        return self.inner.format(escaped_record(record, self.inner))


def escape_handlers(logger: logging.Logger) -> None:
    """Wrap the formatter of each of logger's handlers (once) in EscapingWrapper."""
    for handler in logger.handlers:
        if not isinstance(handler.formatter, EscapingFormatter | EscapingWrapper):
            handler.setFormatter(EscapingWrapper(handler.formatter))
