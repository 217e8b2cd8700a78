"""Time values as the API writes them: ISO 8601 with a `+00:00` offset and no fraction
(created_at, updated_at), and whole epoch seconds (last_interacted_at, since)."""

from __future__ import annotations

from datetime import UTC, datetime

# Formatted timestamps by value: a page repeats its rows' timestamps on every poll, and
# isoformat(timespec=...) costs several times a dict look-up (issue 13). Bounded: emptied
# whenever it is full.
_ISO_CACHE: dict[datetime, str] = {}
ISO_CACHE_SIZE = 16384


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    out = _ISO_CACHE.get(value)
    if out is not None:
        return out
    utc = value if value.tzinfo is UTC else value.astimezone(UTC)  # asyncpg's is UTC already
    # what utc.isoformat(timespec="seconds") writes, several times faster
    out = "%04d-%02d-%02dT%02d:%02d:%02d+00:00" % (  # noqa: UP031 (faster than f-strings)
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second)
    if len(_ISO_CACHE) >= ISO_CACHE_SIZE:
        _ISO_CACHE.clear()
    _ISO_CACHE[value] = out
    return out


def epoch(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value is not None else None
