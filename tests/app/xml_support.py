"""Reading Rails `to_xml` documents by their conventions, to compare ours with the XML the
original service answered (tests/fixtures/socialcast/xml, Socialcastr's fixtures, 2011)."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "socialcast" / "xml"


def fixture(name: str) -> ElementTree.Element:
    return ElementTree.parse(FIXTURES / name).getroot()


def form(el: ElementTree.Element) -> str | None:
    """What an element says it holds: "nil", its `type`, or None (text or an object). Two
    differences decided in decisions.md count as none: Ruby symbols are plain strings here, and
    Commons marks timestamps (`*-at`) `datetime` where the 2011 answers had no type."""
    if el.get("nil") == "true":
        return "nil"
    kind = el.get("type")
    if kind == "symbol" or (kind == "datetime" and el.tag.endswith("-at")):
        return None
    return kind


def forms_by_path(roots: list[ElementTree.Element]) -> dict[str, set[str | None]]:
    """`message/user/id` -> every form seen there, over the trees of `roots`."""
    out: dict[str, set[str | None]] = {}

    def walk(el: ElementTree.Element, path: str) -> None:
        here = f"{path}/{el.tag}" if path else el.tag
        out.setdefault(here, set()).add(form(el))
        if el.get("type") == "array":
            out.setdefault(f"{here}[]", set()).update(child.tag for child in el)
        for child in el:
            walk(child, here)

    for root in roots:
        walk(root, "")
    return out
