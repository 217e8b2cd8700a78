"""Polls: create, bind to a message, read by poll or message, respond (one answer per user,
changing it moves the count), concurrency, visibility and tenancy."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.app.views.feed_support import make_group, post
from tests.support import Member, World

POLL_KEYS = ["id", "question", "answers", "social_object_id", "my_response_id"]
ANSWER_KEYS = ["id", "text", "response_count"]


async def make_poll(member: Member, question: str = "Best tool?",
                    answers: tuple[str, ...] = ("PowerPoint", "Keynote", "Slides")) -> Any:
    data = {"poll[question]": question}
    for i, answer in enumerate(answers):
        data[f"poll[poll_answers_attributes][{i}][answer]"] = answer
    resp = await member.api.post("/api/polls", data=data)
    assert resp.status == 201, resp.text
    return resp.json["poll"]


def counts(poll: Any) -> list[int]:
    return [a["response_count"] for a in poll["answers"]]


async def test_create_a_poll_and_bind_it_to_a_message(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    poll = await make_poll(admin)
    assert list(poll) == POLL_KEYS
    assert all(list(a) == ANSWER_KEYS for a in poll["answers"])
    assert poll["question"] == "Best tool?"
    assert [a["text"] for a in poll["answers"]] == ["PowerPoint", "Keynote", "Slides"]
    assert (poll["social_object_id"], poll["my_response_id"], counts(poll)) == (
        None, None, [0, 0, 0]
    )
    # unbound: only its creator sees it
    assert (await bob.api.get(f"/api/polls/{poll['id']}")).status == 404
    refused = await bob.api.post("/api/messages", json={
        "message": {"body": "stolen poll", "poll_id": poll["id"]}})
    assert refused.status == 422 and "message[poll_id]" in refused.json["fields"]
    message = await post(admin, "What should I use?", poll_id=poll["id"])
    assert (message["message_type"], message["action"]) == ("poll", "created a poll")
    assert message["poll"]["id"] == poll["id"]
    assert message["poll"]["social_object_id"] == message["id"]
    assert message["embed"] == f"/polls/{poll['id']}"
    reused = await admin.api.post("/api/messages", json={
        "message": {"body": "again", "poll_id": poll["id"]}})
    assert reused.status == 422
    shown = await bob.api.get(f"/api/polls/{poll['id']}")
    assert shown.status == 200 and shown.json["poll"]["social_object_id"] == message["id"]
    by_message = await bob.api.get(f"/api/messages/{message['id']}/poll")
    assert by_message.status == 200 and by_message.json == shown.json
    plain = await post(admin, "no poll here")
    assert (await bob.api.get(f"/api/messages/{plain['id']}/poll")).status == 404


async def test_poll_answers_in_json_and_validation(world: World) -> None:
    admin = await world.community()
    resp = await admin.api.post("/api/polls", json={"poll": {
        "question": "Lunch?",
        "poll_answers_attributes": {"1": {"answer": "Later"}, "0": {"answer": "Now"},
                                    "2": {"answer": ""}}}})
    assert resp.status == 201, resp.text
    assert [a["text"] for a in resp.json["poll"]["answers"]] == ["Now", "Later"]
    no_question = await admin.api.post("/api/polls", json={"poll": {
        "question": " ", "poll_answers_attributes": [{"answer": "a"}, {"answer": "b"}]}})
    assert no_question.status == 422 and "poll[question]" in no_question.json["fields"]
    one_answer = await admin.api.post("/api/polls", json={"poll": {
        "question": "Q", "poll_answers_attributes": [{"answer": "only"}]}})
    assert one_answer.status == 422


async def test_respond_change_and_counts(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    poll = await make_poll(admin)
    message = await post(admin, "Vote", poll_id=poll["id"])
    first, second, _third = (a["id"] for a in poll["answers"])
    voted = await bob.api.post(f"/api/polls/{poll['id']}/respond", json={"answer_id": first})
    assert voted.status == 201, voted.text
    assert list(voted.json) == ["poll"]
    assert voted.json["poll"]["my_response_id"] == first
    assert counts(voted.json["poll"]) == [1, 0, 0]
    by_message = await carol.api.post(f"/api/messages/{message['id']}/poll/respond",
                                      data={"answer_id": str(first)})
    assert by_message.status == 201 and counts(by_message.json["poll"]) == [2, 0, 0]
    changed = await bob.api.post(f"/api/polls/{poll['id']}/respond", json={"answer_id": second})
    assert counts(changed.json["poll"]) == [1, 1, 0]
    assert changed.json["poll"]["my_response_id"] == second
    seen_by_admin = (await admin.api.get(f"/api/messages/{message['id']}")).json["message"]
    assert seen_by_admin["poll"]["my_response_id"] is None
    assert counts(seen_by_admin["poll"]) == [1, 1, 0]
    other_poll = await make_poll(admin, "Other?")
    wrong = await bob.api.post(f"/api/polls/{poll['id']}/respond",
                               json={"answer_id": other_poll["answers"][0]["id"]})
    assert wrong.status == 422 and "answer_id" in wrong.json["fields"]
    missing = await bob.api.post(f"/api/polls/{poll['id']}/respond", json={})
    assert missing.status == 422


async def test_concurrent_responses_count_right(world: World) -> None:
    admin = await world.community()
    voters = await world.many_users(admin, 12)
    poll = await make_poll(admin, answers=("Yes", "No"))
    await post(admin, "Vote now", poll_id=poll["id"])
    yes, no = (a["id"] for a in poll["answers"])
    path = f"/api/polls/{poll['id']}/respond"
    results = await asyncio.gather(*(
        v.api.post(path, json={"answer_id": yes if i % 3 else no})
        for i, v in enumerate(voters)
    ))
    assert all(r.status == 201 for r in results)
    # everyone switches at once, some twice
    await asyncio.gather(*(
        v.api.post(path, json={"answer_id": no}) for v in voters
    ), *(voters[0].api.post(path, json={"answer_id": yes}) for _ in range(3)))
    await voters[0].api.post(path, json={"answer_id": no})
    final = (await admin.api.get(f"/api/polls/{poll['id']}")).json["poll"]
    assert counts(final) == [0, 12]
    rows = await world.pool.fetchval("SELECT count(*) FROM poll_responses WHERE poll_id = $1",
                                     poll["id"])
    assert rows == 12


async def test_polls_follow_their_messages_visibility(world: World) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    private = await make_group(world, admin, "Board", permission="private")
    poll = await make_poll(admin)
    message = await post(admin, "Board vote", poll_id=poll["id"], group_id=private)
    answer = poll["answers"][0]["id"]
    other = await world.community("Other")
    for member in (bob, other):
        assert (await member.api.get(f"/api/polls/{poll['id']}")).status == 404
        assert (await member.api.get(f"/api/messages/{message['id']}/poll")).status == 404
        assert (await member.api.post(f"/api/polls/{poll['id']}/respond",
                                      json={"answer_id": answer})).status == 404
    archived = await make_group(world, admin, "Old", members=[bob])
    old_poll = await make_poll(admin)
    await post(admin, "Old vote", poll_id=old_poll["id"], group_id=archived)
    await world.pool.execute("UPDATE groups SET state = 'archived' WHERE id = $1", archived)
    closed = await bob.api.post(f"/api/polls/{old_poll['id']}/respond",
                                json={"answer_id": old_poll["answers"][0]["id"]})
    assert closed.status == 403
    assert (await bob.api.get(f"/api/polls/{old_poll['id']}")).status == 200
