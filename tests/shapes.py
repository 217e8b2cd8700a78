"""Key order of API objects against the captured payloads (tests/fixtures/socialcast/keys.md,
a copy of shared/fixtures/socialcast/keys.md): each object's keys are exactly the captured
ones in their order, then whatever the object adds after them (decisions.md: fields that
interface.md lists but the captured payloads lack come after the captured keys)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

KEYS_MD = Path(__file__).resolve().parent / "fixtures" / "socialcast" / "keys.md"
_KEY_LINE = re.compile(r"^\s*\d+\. ([a-z_]+):")

# Extras that decisions.md names, per object type (in the interface's order).
USER_EXTRAS = ("first_name", "last_name", "out_of_office_on")
GROUP_EXTRAS = ("html_description", "rule_managed")
COMMENT_EXTRAS = ("recipients", "watchable", "watch", "tags")
MEDIA_FILE_EXTRAS = ("id", "canonical", "file_name", "width", "height")
EXTERNAL_RESOURCE_EXTRAS = ("open_in_new_tab",)


@cache
def captured_keys(section: str) -> tuple[str, ...]:
    """The keys of the first key list (Variant A) under the `## <section>` heading whose title
    starts with `section`."""
    lines = KEYS_MD.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(f"## {section}")]
    if len(starts) != 1:
        raise KeyError(f"{len(starts)} sections of keys.md start with {section!r}")
    keys: list[str] = []
    in_block = False
    for line in lines[starts[0] + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("```"):
            if in_block:
                break
            in_block = True
            continue
        match = _KEY_LINE.match(line) if in_block else None
        if match:
            keys.append(match.group(1))
    if not keys:
        raise KeyError(f"no key list under {section!r}")
    return tuple(keys)


def assert_keys(obj: Mapping[str, Any], section: str, extras: Sequence[str] = (),
                *, between: Sequence[str] = ()) -> None:
    """`obj` has exactly the captured keys of `section` in order, then `between` (keys the
    object adds that are not from interface.md's extras, e.g. a chat group's chat keys), then
    `extras`."""
    expected = [*captured_keys(section), *between, *extras]
    assert list(obj) == expected, (
        f"{section}: keys differ\n  got      {list(obj)}\n  expected {expected}")
