"""Demo data for `commons seed-demo`: people with managers, follows and profile fields, then
groups, messages, comments and likes made through the real actions (so they are rendered,
tagged and visible exactly as the API would make them)."""

from __future__ import annotations

import random
from typing import Any

import asyncpg

from app.context import Viewer
from app.passwords import Passwords
from storage import communities, custom_fields, follows, users, versions
from storage.communities import Community
from storage.db import transaction

FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret",
         "Dennis", "Radia", "Linus", "Katherine", "Tim", "Hedy", "Claude", "Shafi", "John"]
LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson",
        "Hamilton", "Ritchie", "Perlman", "Torvalds", "Johnson", "Berners-Lee", "Lamarr",
        "Shannon", "Goldwasser", "Backus"]
TITLES = ["Engineer", "Designer", "Product Manager", "Researcher", "Support Lead", None]
DEMO_PASSWORD = "demo-password"


async def seed_demo(
    pool: asyncpg.Pool, passwords: Passwords, *, domain: str, users: int = 25
) -> dict[str, Any]:
    community = await communities.by_domain(pool, domain)
    if community is None:
        found = await communities.all_communities(pool)
        if len(found) != 1:
            raise SystemExit(f"no community with domain {domain}")
        community = found[0]
    rng = random.Random(42)
    actor = Viewer.system(community.id)
    password_hash = await passwords.hash(DEMO_PASSWORD)
    created: list[int] = []
    async with transaction(pool) as conn:
        existing = await custom_fields.list_fields(conn, actor.community_id)
        fields = {r["name"]: r["id"] for r in existing}
        for name in ("Department", "Location"):
            if name not in fields:
                fields[name] = (await custom_fields.insert(conn, community.id, name, None))["id"]
        start = await conn.fetchval("SELECT count(*) FROM users WHERE community_id = $1",
                                    community.id)
        for i in range(users):
            first, last = rng.choice(FIRST), rng.choice(LAST)
            n = start + i
            row = await users_insert(conn, community.id, first, last, n, password_hash,
                                     rng.choice(TITLES), created[0] if created else None)
            created.append(row)
            await conn.execute(
                "INSERT INTO custom_field_values (user_id, custom_field_id, value) "
                "VALUES ($1, $2, $3), ($1, $4, $5)",
                row, fields["Department"], rng.choice(["R&D", "Sales", "Support", "People"]),
                fields["Location"], rng.choice(["Lisbon", "Austin", "Tokyo", "Nairobi"]),
            )
        for uid in created:
            for other in rng.sample(created, k=min(5, len(created))):
                if other != uid:
                    await follows.follow(conn, community.id, uid, other)
        # written here rather than by units of work: the polled lists' ETags must change too
        await versions.bump(conn, community.id)
    content = await _seed_content(pool, community, created, rng)
    return {"community": community.domain, "users_created": len(created), **content,
            "password": DEMO_PASSWORD}


GROUPS = [("Engineering", "public"), ("Design Crit", "public"), ("Leadership", "private")]
POSTS = [
    "Shipped the new onboarding flow today #release",
    "Who has a good recipe for the team lunch? #social",
    "Reminder: retro on Thursday, bring your notes #process",
    "Great customer call this morning, they love the search #customers",
    "Draft of the Q3 plan is up, comments welcome #planning",
]
REPLIES = ["Nice work!", "+1", "I can help with that.", "Thanks for sharing", "Agreed"]


async def _seed_content(
    pool: asyncpg.Pool, community: Community, user_ids: list[int], rng: random.Random
) -> dict[str, int]:
    from app.actions.comments import NewComment, create_comment
    from app.actions.groups import GroupFields, create_group
    from app.actions.likes import like
    from app.actions.messages import NewMessage, create_message
    from storage.memberships import insert_many

    if not user_ids:
        return {"groups_created": 0, "messages_created": 0}
    rows = {r["id"]: r for r in await users.by_ids(pool, community.id, user_ids)}
    people = [Viewer(id=u, community_id=community.id, role=rows[u]["role"], row=rows[u])
              for u in user_ids]
    base = community.base_url
    group_ids: list[int] = []
    for n, (name, permission) in enumerate(GROUPS):
        owner = people[n % len(people)]
        taken = await pool.fetchval(
            "SELECT 1 FROM groups WHERE community_id = $1 AND lower(name) = lower($2)",
            community.id, name)
        if taken:
            continue
        group = await create_group(pool, owner, GroupFields(
            name=name, description=f"The {name} group", permission=permission,
            chat_enabled=True))
        group_ids.append(group["id"])
        async with transaction(pool) as conn:
            members = rng.sample(people, k=min(len(people), 8))
            await insert_many(conn, community.id, group["id"],
                              [(m.id, "member") for m in members if m.id != owner.id])
            await versions.bump(conn, community.id)
    messages = 0
    for n in range(min(len(people) * 2, 40)):
        author = people[n % len(people)]
        group_id = group_ids[n % len(group_ids)] if group_ids and n % 3 == 0 else None
        is_member = group_id is None or await pool.fetchval(
            "SELECT 1 FROM group_memberships WHERE group_id = $1 AND user_id = $2",
            group_id, author.id)
        message_id = await create_message(pool, author, base, NewMessage(
            body=rng.choice(POSTS), group_id=group_id if is_member else None))
        messages += 1
        for other in rng.sample(people, k=min(3, len(people))):
            if other.id == author.id or group_id is not None:
                continue
            await create_comment(pool, other, base, message_id,
                                 NewComment(text=rng.choice(REPLIES)))
            await like(pool, other, message_id)
    return {"groups_created": len(group_ids), "messages_created": messages}


async def users_insert(
    conn: asyncpg.Connection, community_id: int, first: str, last: str, n: int,
    password_hash: str, title: str | None, manager_id: int | None,
) -> int:
    username = f"{first}{last}{n}".replace("-", "")
    row = await users.insert(
        conn, community_id, email=f"{username.lower()}@demo.example", username=username,
        first_name=first, last_name=last, password_hash=password_hash, title=title,
        manager_id=manager_id,
    )
    return int(row["id"])
