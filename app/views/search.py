"""GET /api/search/suggestions: autocomplete of people and groups, in headed result sets.

Answer: `{"results": [{"heading": "People you follow", "entries": [<embedded User>...]},
{"heading": "Entire company", "entries": [...]}, {"heading": "Groups", "entries": [<short
Group>...]}]}`. Every entry carries `type` ("User" or "Group").

- `q` (required, word-prefix match on names, username and e-mail; on group names and
  groupnames). Blank is a 422.
- `types` (Group, Project, Challenge, SkillOption, Topic, TownHall, User; default User and
  Group): which sets to answer. Only User, Group and Topic have sets here; the others are
  accepted and answer nothing. Topic gives a "Topics" set of `{id, name, url, type: "Topic"}`
  (name prefix, topics the viewer may see, at most 20), after the others.
- Each requested set is present, in the order above, even when it has no entries.
- `user_filter[include_categories]` (entire_company, people_you_follow; default both): the two
  user sets. With both, a followed user is listed under "People you follow" only.
  `user_filter[account_states]` (active, deactivated; default active), `user_filter[role]`
  (member, admin), `user_filter[exclude_ids][]`, `user_filter[max_results]` (default 20, at most
  500, per user set).
- `group_filter[...]`: `visibility` (public, private), `exclude_ids[]`, `member_only`,
  `can_post_only` (groups the viewer may post in),
  `exclude_external_facing` (external contributor groups), `exclude_provisioned` (groups whose
  group_type is not 'standard'), `max_results` (default 20, above 500 served as 500).
  Groups are those the viewer may see listed (storage/group_visibility.py); the viewer's own
  groups come first.
- `context_type=group&context_id=N`: members of group N are ranked first among users, when the
  viewer may read that group (otherwise ignored, so ranking never tells who is in it).
  `context_type=message`: the message's author and the members of its group rank first, when
  the viewer may read the message. townhall and project are accepted and ignored.
  `can_post_only` follows the messages' posting rule (see storage/suggestions.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, Field, field_validator
from pydantic_core import PydanticCustomError

from app.actions import suggestions
from app.actions.topics import search_topics
from app.context import community_of, viewer_of
from app.errors import Invalid
from app.params import LOOSE, IdList, OptionalId, Page, StrList, parse
from app.render.groups_short import short_group
from app.render.topics import topic_entry
from app.render.users import embedded_user
from app.resources import pool_of
from app.responses import json_response
from app.views.users import tsquery_of

MAX_RESULTS = 500
TOPIC_RESULTS = 20

TYPES = {t.lower(): t for t in (
    "Group", "Project", "Challenge", "SkillOption", "Topic", "TownHall", "User",
)}
CONTEXT_TYPES = ("group", "townhall", "project", "message")
ACCOUNT_STATES = {"active": ("active",), "deactivated": ("inactive", "terminated")}
ROLES = {"member": "member", "admin": "tenant_admin"}
CATEGORIES = ("people_you_follow", "entire_company")
HEADINGS = {
    "followed": "People you follow", "company": "Entire company", "groups": "Groups",
    "topics": "Topics",
}


def _blank_false(value: Any) -> Any:
    return False if value is None or (isinstance(value, str) and not value.strip()) else value


def _blank_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


Flag = Annotated[bool, BeforeValidator(_blank_false)]
MaxResults = Annotated[int, BeforeValidator(lambda v: 20 if v in (None, "") else v)]


def _one_of(values: list[str], allowed: tuple[str, ...] | dict[str, Any]) -> list[str]:
    out = [v.strip().lower() for v in values]
    for value in out:
        if value not in allowed:
            raise PydanticCustomError("enum", f"must be one of {', '.join(allowed)}")
    return out


class UserFilter(BaseModel):
    model_config = LOOSE
    account_states: StrList = Field(default_factory=lambda: ["active"])
    exclude_ids: IdList = Field(default_factory=list)
    role: Annotated[str | None, BeforeValidator(_blank_none)] = None
    include_categories: StrList = Field(default_factory=lambda: list(CATEGORIES))
    max_results: MaxResults = Field(20, ge=1)

    @field_validator("account_states")
    @classmethod
    def _states(cls, value: list[str]) -> list[str]:
        return _one_of(value or ["active"], ACCOUNT_STATES)

    @field_validator("include_categories")
    @classmethod
    def _categories(cls, value: list[str]) -> list[str]:
        return _one_of(value or list(CATEGORIES), CATEGORIES)

    @field_validator("role")
    @classmethod
    def _role(cls, value: str | None) -> str | None:
        return None if value is None else _one_of([value], ROLES)[0]


class GroupFilter(BaseModel):
    model_config = LOOSE
    visibility: Annotated[str | None, BeforeValidator(_blank_none)] = Field(
        None, pattern="^(public|private)$"
    )
    exclude_ids: IdList = Field(default_factory=list)
    member_only: Flag = False
    can_post_only: Flag = False
    exclude_external_facing: Flag = False
    exclude_provisioned: Flag = False
    max_results: MaxResults = Field(20, ge=1)


class SuggestionsQuery(BaseModel):
    model_config = LOOSE
    q: str | None = Field(None, max_length=500)
    context_id: OptionalId = None
    context_type: Annotated[str | None, BeforeValidator(_blank_none)] = None
    types: StrList = Field(default_factory=lambda: ["User", "Group"])
    user_filter: UserFilter = Field(default_factory=UserFilter)
    group_filter: GroupFilter = Field(default_factory=GroupFilter)

    @field_validator("types")
    @classmethod
    def _types(cls, value: list[str]) -> list[str]:
        return [TYPES[t] for t in _one_of(value or ["User", "Group"], TYPES)]

    @field_validator("context_type")
    @classmethod
    def _context(cls, value: str | None) -> str | None:
        return None if value is None else _one_of([value], CONTEXT_TYPES)[0]


async def suggestions_view(request: web.Request) -> web.Response:
    query = await parse(request, SuggestionsQuery)
    q = (query.q or "").strip()
    if not q:
        raise Invalid.field("q", "can't be blank")
    viewer = viewer_of(request)
    base = community_of(request).base_url
    pool = pool_of(request)
    tsquery = tsquery_of(q)[0]
    uf, gf = query.user_filter, query.group_filter
    results: list[dict[str, Any]] = []
    if "User" in query.types:
        states = [s for name in uf.account_states for s in ACCOUNT_STATES[name]]
        context_group, context_users = await suggestions.context_of(
            pool, viewer, query.context_type, query.context_id
        )
        rows = await suggestions.suggest_users(
            pool, viewer, tsquery=tsquery,
            states=states, exclude_ids=uf.exclude_ids,
            roles=[ROLES[uf.role]] if uf.role else None,
            followed_set="people_you_follow" in uf.include_categories,
            company_set="entire_company" in uf.include_categories,
            limit=min(uf.max_results, MAX_RESULTS), context_group_id=context_group,
            context_user_ids=context_users,
        )
        for category, wanted in (("followed", "people_you_follow"),
                                 ("company", "entire_company")):
            if wanted in uf.include_categories:
                entries = [embedded_user(r, base) for r in rows if r["category"] == category]
                results.append({"heading": HEADINGS[category], "entries": entries})
    if "Group" in query.types:
        rows = await suggestions.suggest_groups(
            pool, viewer, tsquery=tsquery,
            groupname_prefix=q, visibility=gf.visibility, exclude_ids=gf.exclude_ids,
            member_only=gf.member_only, can_post_only=gf.can_post_only,
            exclude_external_facing=gf.exclude_external_facing,
            exclude_provisioned=gf.exclude_provisioned, limit=min(gf.max_results, MAX_RESULTS),
        )
        results.append({"heading": HEADINGS["groups"],
                        "entries": [short_group(r, base) for r in rows]})
    if "Topic" in query.types:
        rows = await search_topics(pool, viewer, q.lstrip("#"), Page(1, TOPIC_RESULTS))
        results.append({"heading": HEADINGS["topics"],
                        "entries": [topic_entry(r, base) for r in rows]})
    return json_response({"results": results})
