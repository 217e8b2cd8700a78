"""The key-order helper reads keys.md as written and fails on a wrong order."""

from __future__ import annotations

import pytest

from tests.shapes import assert_keys, captured_keys


def test_captured_keys_of_a_few_sections() -> None:
    assert captured_keys("Comment")[:3] == ("id", "url", "user")
    assert len(captured_keys("Comment")) == 17
    assert captured_keys("User — embedded")[-1] == "company_login"
    assert captured_keys("User — as a message recipient")[-1] == "mention_name"
    assert len(captured_keys("Group — full")) == 27
    assert captured_keys("Media file in `message.media_files[]`")[-1] == "external_resource_id"
    with pytest.raises(KeyError):
        captured_keys("User")  # several sections: ambiguous


def test_assert_keys_fails_on_order_and_extras() -> None:
    like_user = {"id": 1, "name": "A", "url": "u"}
    assert_keys(like_user, "User — in a Like")
    with pytest.raises(AssertionError):
        assert_keys({"name": "A", "id": 1, "url": "u"}, "User — in a Like")
    with pytest.raises(AssertionError):
        assert_keys(like_user, "User — in a Like", extras=("first_name",))
