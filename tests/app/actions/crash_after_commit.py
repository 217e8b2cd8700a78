"""Run one write action, then die the hard way right after its first commit.

    python -m tests.app.actions.crash_after_commit DSN CASE JSON

The pool's query observer sees every statement once it has completed; on the first COMMIT it
SIGKILLs the process (no cleanup, no finally, no atexit) at the event loop's next turn, before
anything after the commit reaches PostgreSQL: a second transaction, or the hub's publish (the
first thing a unit of work does once committed). Exits 3 if the action ever returns.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import asyncpg

from app.actions.comments import NewComment, create_comment
from app.actions.messages import NewMessage, create_message
from app.actions.remarks import Remark, post_remark
from app.context import Viewer
from realtime.events import Event
from storage.db import create_pool


def kill_after_commit(query: str) -> None:
    if query.strip().rstrip(";").upper() == "COMMIT":
        os.kill(os.getpid(), signal.SIGKILL)


class KillOnPublish:
    """A hub whose publish kills the process too (it never gets that far)."""

    async def publish(self, events: Sequence[Event]) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


async def perform(pool: asyncpg.Pool, hub: Any, case: str, args: dict[str, Any]) -> None:
    """The write action of `case` (message, announcement, comment, remark), as `args` says."""
    viewer = Viewer(id=args["user_id"], community_id=args["community_id"], role=args["role"])
    base = args["base"]
    if case in ("message", "announcement"):
        await create_message(pool, viewer, base, NewMessage(
            body=args["body"], message_type=args.get("message_type")), hub=hub)
    elif case == "comment":
        await create_comment(pool, viewer, base, args["message_id"],
                             NewComment(args["text"]), hub=hub)
    elif case == "remark":
        await post_remark(pool, hub, viewer, args["conversation_id"],
                          Remark(text=args["text"]), base)
    else:
        raise ValueError(f"unknown case {case}")


async def run(dsn: str, case: str, args: dict[str, Any]) -> None:
    pool = await create_pool(dsn, observer=kill_after_commit)
    await perform(pool, KillOnPublish(), case, args)
    sys.exit(3)


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
