"""Free names: a username or groupname made unique with a counter."""

from __future__ import annotations

from collections.abc import Collection


def first_free(wanted: str, taken: Collection[str]) -> str:
    """`wanted`, or `wanted2`, `wanted3`... whichever is not in `taken` (lower-case names:
    names are unique whatever their letter case)."""
    if wanted.lower() not in taken:
        return wanted
    n = 2
    while f"{wanted}{n}".lower() in taken:
        n += 1
    return f"{wanted}{n}"
