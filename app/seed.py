"""Demo data for `commons seed-demo`: people with managers, follows and profile fields."""

from __future__ import annotations

import random
from typing import Any

import asyncpg

from app.context import Viewer
from app.passwords import Passwords
from storage import communities, custom_fields, follows, users
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
    return {"community": community.domain, "users_created": len(created),
            "password": DEMO_PASSWORD}


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
