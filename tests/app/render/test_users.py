"""app.render.users: the full form writes the embedded form's keys out itself (one literal);
they must stay the same keys, values and order as embedded_user's."""

from __future__ import annotations

from datetime import date
from typing import Any, cast

import pytest

from app.render.users import contact_info, custom_fields_of, embedded_user, full_user
from storage.rows import FullUserRow

BASE = "https://x.example"


def _row(**changes: Any) -> FullUserRow:
    row: dict[str, Any] = {
        "id": 7, "community_id": 1, "email": "ada@x.example", "username": "Ada_L",
        "first_name": "Ada", "last_name": "<Lovelace>", "role": "member", "state": "active",
        "title": "Engineer", "company_login": "ada", "manager_id": None,
        "status_message": "hi", "out_of_office": False, "back_in_office_on": None,
        "contact_info": None, "avatar_id": None, "following_count": 2, "followers_count": 3,
        "viewer_follows": False, "manager": None, "custom_values": None,
    }
    row.update(changes)
    return cast(FullUserRow, row)


@pytest.mark.parametrize("changes", [
    {},
    {"state": "terminated", "avatar_id": 12, "back_in_office_on": date(2026, 1, 2)},
    {"first_name": "", "last_name": "", "state": "inactive", "out_of_office": True},
])
def test_full_user_ends_with_embedded_user_keys_values_and_order(changes: dict[str, Any]) -> None:
    row = _row(**changes)
    full = full_user(row, BASE, viewer_id=1, contact=contact_info(row), manager=None,
                     custom_fields=[])
    embedded = embedded_user(row, BASE)
    head = ["contact_info", "manager", "custom_fields", "followable", "contact_id",
            "following_count", "followers_count", "status_message"]
    assert list(full) == head + list(embedded)
    assert {k: full[k] for k in embedded} == embedded


def test_followable_and_custom_fields() -> None:
    def followable(row: FullUserRow, viewer_id: int) -> bool:
        return bool(full_user(row, BASE, viewer_id=viewer_id, contact=contact_info(row),
                              manager=None, custom_fields=[])["followable"])

    assert followable(_row(), 1)
    assert not followable(_row(), 7)
    assert not followable(_row(viewer_follows=True), 1)
    expected = [{"id": "3", "value": "Core", "label": "Team"}]
    assert custom_fields_of([[3, "Team", "Core"]]) == expected
    assert custom_fields_of(None) == []
