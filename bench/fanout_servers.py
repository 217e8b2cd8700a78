"""The two reference servers of bench/fanout.py, each run as its own process:

    python bench/fanout_servers.py floor    --port P --redis URL --channel C
    python bench/fanout_servers.py socketio --port P --redis URL --channel C

floor: the least a websocket fan-out over Redis can do with aiohttp: GET /ws registers the
socket (and sends a welcome frame so the client knows it is registered); one Redis
subscription per process; every published payload is written, as is, to every local socket;
POST /publish publishes the request body. No auth, no database, no ordering, no resume: with
`?since=` it sends `--replay` frames of `--replay-bytes` after the welcome, the bytes a Commons
replay would send (bench/fanout_storm.py). `--reuse-port`: several processes on one port.

socketio: python-socketio's AsyncServer on aiohttp with its AsyncRedisManager (how it is
documented for several processes): every client joins the room "bench" on connect, and
POST /publish emits the JSON body as the event "remark" to that room.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
from aiohttp import WSMsgType, web
from redis.asyncio import Redis

WELCOME = b'{"type":"welcome"}'


def floor_app(
    redis_url: str, channel: str, replay: int = 0, replay_bytes: int = 300
) -> web.Application:
    app = web.Application()
    replay_frame = b'{"type":"event","data":"' + b"x" * max(0, replay_bytes - 28) + b'"}'

    sockets: set[web.WebSocketResponse] = set()
    publisher: dict[str, Redis] = {}

    async def ws_handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=False)
        await ws.prepare(request)
        sockets.add(ws)
        try:
            await ws.send_frame(WELCOME, WSMsgType.TEXT)
            if "since" in request.query:
                for _ in range(replay):
                    await ws.send_frame(replay_frame, WSMsgType.TEXT)
            async for _ in ws:
                pass
        finally:
            sockets.discard(ws)
        return ws

    async def publish(request: web.Request) -> web.Response:
        await publisher["redis"].publish(channel, await request.read())
        return web.Response(status=204)

    async def fan_out(pubsub: Any) -> None:
        async for message in pubsub.listen():
            if message["type"] != "message":
                continue
            data = message["data"]
            for ws in list(sockets):
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await ws.send_frame(data, WSMsgType.TEXT)

    async def redis_ctx(app: web.Application) -> AsyncIterator[None]:
        publisher["redis"] = Redis.from_url(redis_url)
        subscriber = Redis.from_url(redis_url)
        pubsub = subscriber.pubsub()
        await pubsub.subscribe(channel)
        task = asyncio.create_task(fan_out(pubsub))
        yield
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await pubsub.aclose()
        await subscriber.aclose()
        await publisher["redis"].aclose()

    app.cleanup_ctx.append(redis_ctx)
    app.router.add_get("/ws", ws_handler)
    app.router.add_post("/publish", publish)
    return app


def socketio_app(redis_url: str, channel: str) -> web.Application:
    import socketio

    manager = socketio.AsyncRedisManager(redis_url, channel=channel)
    sio = socketio.AsyncServer(async_mode="aiohttp", client_manager=manager,
                               cors_allowed_origins="*", logger=False, engineio_logger=False)
    app = web.Application()
    sio.attach(app)

    @sio.event
    async def connect(sid: str, environ: dict[str, Any], auth: Any = None) -> None:
        await sio.enter_room(sid, "bench")

    async def publish(request: web.Request) -> web.Response:
        await sio.emit("remark", orjson.loads(await request.read()), room="bench")
        return web.Response(status=204)

    app.router.add_post("/publish", publish)
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["floor", "socketio"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--reuse-port", action="store_true")
    parser.add_argument("--replay", type=int, default=0)
    parser.add_argument("--replay-bytes", type=int, default=300)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    app = (floor_app(args.redis, args.channel, args.replay, args.replay_bytes)
           if args.kind == "floor" else socketio_app(args.redis, args.channel))
    # the listen queue Commons has (app/server.py LISTEN_BACKLOG)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None,
                reuse_port=args.reuse_port, backlog=4096)


if __name__ == "__main__":
    main()
