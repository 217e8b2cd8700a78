"""Polls: POST /api/polls (poll[question], poll[poll_answers_attributes][N][answer]) answers
201 {"poll"}; bind it with message[poll_id]. Reading by poll or by message; responding
(answer_id) answers 201 {"poll"} with the new counts and my_response_id."""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, Field

from app.access import access_poll
from app.actions import polls as actions
from app.context import viewer_of
from app.errors import Invalid
from app.params import LOOSE, as_list, parse, path_id
from app.render.polls import poll
from app.resources import pool_of
from app.responses import created, json_response


def _answers(value: Any) -> list[str]:
    """{"0": {"answer": "x"}, ...} (Rails nested attributes), a list of such hashes, or a list
    of strings; entries marked `_destroy` are dropped."""
    out: list[str] = []
    for item in as_list(value):
        if isinstance(item, dict):
            if str(item.get("_destroy", "")).lower() in ("1", "true"):
                continue
            text = item.get("answer", item.get("text", ""))
        else:
            text = item
        if not isinstance(text, str | int | float):
            raise Invalid.field("poll[poll_answers_attributes]", "must hold answer texts")
        out.append(str(text))
    return out


class PollParams(BaseModel):
    model_config = LOOSE
    question: str = Field("", max_length=actions.MAX_QUESTION)
    poll_answers_attributes: Annotated[list[str], BeforeValidator(_answers)] = Field(
        default_factory=list
    )


class PollCreateBody(BaseModel):
    model_config = LOOSE
    poll: PollParams


class RespondBody(BaseModel):
    model_config = LOOSE
    answer_id: int


async def _render(request: web.Request, poll_id: int) -> dict[str, Any]:
    viewer = viewer_of(request)
    return poll(await access_poll(pool_of(request), viewer, poll_id))


async def create_poll(request: web.Request) -> web.Response:
    body = await parse(request, PollCreateBody)
    poll_id = await actions.create_poll(
        pool_of(request), viewer_of(request), body.poll.question,
        body.poll.poll_answers_attributes,
    )
    return created({"poll": await _render(request, poll_id)})


async def show_poll(request: web.Request) -> web.Response:
    return json_response({"poll": await _render(request, path_id(request, "poll_id"))})


async def show_message_poll(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    row = await actions.poll_of_message(pool_of(request), viewer, path_id(request, "message_id"))
    return json_response({"poll": poll(row)})


async def respond(request: web.Request) -> web.Response:
    body = await parse(request, RespondBody)
    poll_id = path_id(request, "poll_id")
    await actions.respond(pool_of(request), viewer_of(request), poll_id, body.answer_id)
    return created({"poll": await _render(request, poll_id)})


async def respond_by_message(request: web.Request) -> web.Response:
    body = await parse(request, RespondBody)
    viewer = viewer_of(request)
    pool = pool_of(request)
    row = await actions.poll_of_message(pool, viewer, path_id(request, "message_id"))
    await actions.respond(pool, viewer, row["id"], body.answer_id)
    return created({"poll": await _render(request, row["id"])})

