"""iso(): the formatted form equals isoformat(timespec="seconds") in UTC, cached or not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from app.render import times
from app.render.times import iso


def test_iso_writes_what_isoformat_writes() -> None:
    for value in (
        datetime(2026, 11, 25, 4, 29, 15, 123456, tzinfo=UTC),
        datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ):
        expected = value.isoformat(timespec="seconds")
        assert iso(value) == expected
        assert iso(value) == expected  # from the cache
    assert iso(None) is None


def test_iso_converts_other_offsets_to_utc() -> None:
    value = datetime(2026, 11, 25, 6, 0, 1, tzinfo=timezone(timedelta(hours=2)))
    assert iso(value) == "2026-11-25T04:00:01+00:00"


def test_the_cache_is_emptied_when_full() -> None:
    times._ISO_CACHE.clear()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(times.ISO_CACHE_SIZE + 1):
        iso(start + timedelta(seconds=i))
    assert len(times._ISO_CACHE) == 1
    assert iso(start) == "2026-01-01T00:00:00+00:00"
