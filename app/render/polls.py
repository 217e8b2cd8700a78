"""Polls (key order as keys.md "Poll": id, question, answers, social_object_id,
my_response_id). Rows come from storage.polls (answers as json with response counts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Row = Mapping[str, Any]


def poll_answer(answer: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": answer["id"],
        "text": answer["text"],
        "response_count": int(answer["response_count"]),
    }


def poll(row: Row) -> dict[str, Any]:
    """`social_object_id` is the message the poll is bound to (null until bound);
    `my_response_id` the id of the answer the viewer chose (null if none)."""
    return {
        "id": row["id"],
        "question": row["question"],
        "answers": [poll_answer(a) for a in row["answers"] or ()],
        "social_object_id": row["message_id"],
        "my_response_id": row["my_response_id"],
    }
