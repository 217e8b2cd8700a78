"""The forms of a user a page shows are shared across pages by the values they are rendered
from (app.render.feed.user_form): never stale, never another viewer's."""

from __future__ import annotations

from datetime import date
from typing import Any

from app.context import Viewer
from app.render.feed import FeedData
from app.render.users import embedded_user, like_user, recipient_user
from storage.rows import EmbeddedUserRow

BASE = "https://acme.example"


def row(**changes: Any) -> EmbeddedUserRow:
    values: dict[str, Any] = {
        "id": 7, "username": "bob", "first_name": "Bob", "last_name": "Smith", "role": "member",
        "state": "active", "title": "Engineer", "company_login": "bsmith",
        "out_of_office": False, "back_in_office_on": None, "avatar_id": None,
    }
    values.update(changes)
    return EmbeddedUserRow(**values)  # type: ignore[typeddict-item]


def forms(user: EmbeddedUserRow, viewer_id: int = 1) -> tuple[dict[str, Any], ...]:
    """The three forms of `user` on a fresh page of this viewer."""
    data = FeedData(BASE, Viewer(id=viewer_id, community_id=1, role="member"),
                    users={user["id"]: user})
    return (data.embedded_user(user["id"]), data.like_user(user["id"]),
            data.render_recipients([{"user_id": user["id"], "group_id": None}])[0])


def fresh(user: EmbeddedUserRow) -> tuple[dict[str, Any], ...]:
    return embedded_user(user, BASE), like_user(user, BASE), recipient_user(user, BASE)


def test_the_same_values_share_one_rendering_across_pages_and_viewers() -> None:
    first = forms(row())
    again = forms(row(), viewer_id=2)
    assert first == fresh(row())
    assert all(a is b for a, b in zip(first, again, strict=True))


def test_a_change_of_any_column_renders_anew() -> None:
    forms(row())
    other: dict[str, Any] = {
        "id": 8, "username": "robert", "first_name": "Rob", "last_name": "Smyth",
        "role": "tenant_admin", "state": "terminated", "title": "Lead", "company_login": "rs",
        "out_of_office": True, "back_in_office_on": date(2026, 12, 1), "avatar_id": 42,
    }
    # every column the user renderers may read (mypy holds them to EmbeddedUserRow)
    assert set(other) == set(EmbeddedUserRow.__annotations__)
    for column, value in other.items():
        changed = row(**{column: value})
        assert forms(changed) == fresh(changed), column
        assert forms(changed) != fresh(row()), column
