"""Time values as the API writes them: ISO 8601 with a `+00:00` offset and no fraction
(created_at, updated_at), and whole epoch seconds (last_interacted_at, since)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.errors import BadRequest


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is not UTC:  # asyncpg gives timestamptz in UTC already
        value = value.astimezone(UTC)
    return value.isoformat(timespec="seconds")


def epoch(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value is not None else None


def from_epoch(seconds: int) -> datetime:
    """A client's epoch seconds (`since`); past what a datetime holds (a client sending
    milliseconds) is the client's error, 400."""
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise BadRequest("since is out of range (epoch seconds expected)") from exc
