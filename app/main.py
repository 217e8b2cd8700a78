"""The application factory: resources as cleanup contexts, middlewares, routes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
from aiohttp import web
from redis.asyncio import Redis

from app import metrics
from app.authentication import SessionCookieStorage
from app.config import Settings
from app.middleware import auth_middleware, errors_middleware
from app.observe import make_observe_middleware
from app.openapi import document as openapi_document
from app.passwords import Passwords, cache_key_from
from app.presence import MemoryPresence, RedisPresence
from app.ratelimit import MemoryRateLimiter, RateLimiter, RedisRateLimiter
from app.resources import (
    BLOBS,
    COMMUNITIES,
    HUB,
    LIMITER,
    LOOKUPS,
    OPENAPI,
    PASSWORDS,
    POOL,
    PRESENCE,
    REDIS,
    REDIS_HEALTH,
    SETTINGS,
)
from app.routes import add_routes
from app.tenancy import CommunityResolver
from app.uploads import uploads_middleware
from app.views.ops import DRAINING, add_ops_routes
from app.xml_format import negotiation_middleware
from realtime.hub import Hub, HubSettings, LocalHub, RedisHub
from storage.batch import Lookups
from storage.blobs import open_blob_store
from storage.credentials_cache import CredentialsCache
from storage.db import QueryObserver, create_pool
from storage.redis import RedisHealth, redis_client

log = logging.getLogger("commons")
STATIC_DIR = Path(__file__).resolve().parent / "static"


def session_secret(settings: Settings) -> bytes:
    """32 bytes for the session cookie: from COMMONS_SECRET_KEY, else kept in the data dir."""
    if settings.secret_key:
        return hashlib.sha256(settings.secret_key.encode()).digest()
    path = settings.data_dir / "secret_key"
    if path.exists():
        return base64.urlsafe_b64decode(path.read_bytes().strip())
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    path.write_bytes(base64.urlsafe_b64encode(key))
    path.chmod(0o600)
    return key


_lost_connections = 0


def _count_connection(conn: object) -> None:
    """Every new pool connection; one that replaces a lost one is a reconnect."""
    global _lost_connections
    metrics.PG_CONNECTIONS_OPENED.inc()
    if _lost_connections > 0:
        _lost_connections -= 1
        metrics.PG_RECONNECTS.inc()

    def lost(closed: object) -> None:
        global _lost_connections
        if not getattr(closed, "closed_on_purpose", True):
            _lost_connections += 1

    add_listener = getattr(conn, "add_termination_listener", None)
    if add_listener is not None:
        add_listener(lost)


POOL_SAMPLE_SECONDS = 5.0


async def _pool_gauges(pool: asyncpg.Pool, size: int) -> None:
    """Pool use as gauges, sampled every POOL_SAMPLE_SECONDS (a request never pays for it)."""
    metrics.DB_POOL_MAX.set(size)
    while True:
        total = pool.get_size()
        metrics.DB_POOL_SIZE.set(total)
        metrics.DB_POOL_IN_USE.set(total - pool.get_idle_size())
        await asyncio.sleep(POOL_SAMPLE_SECONDS)


def create_app(
    settings: Settings, *, query_observer: QueryObserver | None = None
) -> web.Application:
    if not settings.database_url:
        raise ValueError("create_app needs settings.database_url (serve resolves it)")
    secret = session_secret(settings)
    # Secure whenever the client is on https (app/authentication.py)
    storage = SessionCookieStorage(
        secret, cookie_name="commons_session", httponly=True, samesite="Lax",
        max_age=14 * 24 * 3600,
    )
    observe = make_observe_middleware(
        logging.INFO if settings.log_format == "json" else logging.DEBUG
    )
    app = web.Application(
        middlewares=[
            # observe outermost: it times and counts every answer, whatever turned it out;
            # negotiation next: it turns every JSON answer, errors included, into XML.
            # Negotiation and uploads add no frame where they have nothing to do (a JSON
            # answer, a request without a body); the session cookie's storage is set and
            # saved by the authentication's layer (app/middleware.py).
            observe, negotiation_middleware, errors_middleware,
            uploads_middleware(settings.data_dir / "uploads"), auth_middleware(storage),
        ],
        client_max_size=settings.max_upload_bytes + 1024 * 1024,
    )
    app[SETTINGS] = settings
    app[DRAINING] = asyncio.Event()
    passwords = Passwords(
        settings.argon2, settings.credentials_cache_seconds, key=cache_key_from(secret)
    )
    app[PASSWORDS] = passwords
    # one view of Redis's health for the rate limits and the realtime publisher
    app[REDIS_HEALTH] = RedisHealth()

    async def database(app: web.Application) -> AsyncIterator[None]:
        assert settings.database_url
        pool = await create_pool(
            settings.database_url, size=settings.db_pool_size, observer=query_observer,
            reset_sessions=False, connect_timeout=settings.db_connect_timeout_seconds,
            acquire_timeout=settings.db_acquire_timeout_seconds, on_connect=_count_connection,
        )
        app[POOL] = pool
        app[LOOKUPS] = Lookups(pool)
        app[COMMUNITIES] = CommunityResolver(pool)
        gauges = asyncio.get_running_loop().create_task(_pool_gauges(pool, settings.db_pool_size))
        yield
        gauges.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gauges
        await pool.close()

    async def redis(app: web.Application) -> AsyncIterator[None]:
        limiter: RateLimiter
        client: Redis | None = None
        if settings.redis_url:
            client = redis_client(settings.redis_url, timeout=settings.redis_timeout_seconds)
            app[REDIS] = client
            limiter = RedisRateLimiter(client, settings.redis_prefix, app[REDIS_HEALTH])
            app[PRESENCE] = RedisPresence(client, settings.redis_prefix, app[REDIS_HEALTH])
            if settings.credentials_shared_cache_seconds > 0:
                passwords.share(CredentialsCache(
                    client, settings.redis_prefix, app[REDIS_HEALTH],
                    settings.credentials_shared_cache_seconds,
                ))
        else:
            limiter = MemoryRateLimiter()
            app[PRESENCE] = MemoryPresence()
        app[LIMITER] = limiter
        yield
        if client is not None:
            passwords.share(None)
            await client.aclose()

    async def hub(app: web.Application) -> AsyncIterator[None]:
        # Committed events out to the websockets: through Redis between processes, else local.
        realtime: Hub
        if settings.redis_url:
            realtime = RedisHub(
                app[POOL], settings.redis_url,
                HubSettings(channel_prefix=f"{settings.redis_prefix}:rt:",
                            redis_timeout=settings.redis_timeout_seconds),
                health=app[REDIS_HEALTH],
            )
        else:
            realtime = LocalHub(app[POOL])
        await realtime.start()
        app[HUB] = realtime
        yield
        await realtime.close()

    async def blobs(app: web.Application) -> AsyncIterator[None]:
        # attachment bytes: S3 when settings.s3 is set, else files under <data_dir>/blobs
        async with open_blob_store(settings.s3, settings.data_dir) as store:
            app[BLOBS] = store
            yield

    app.cleanup_ctx.append(database)
    app.cleanup_ctx.append(redis)
    app.cleanup_ctx.append(blobs)
    app.cleanup_ctx.append(hub)

    async def close_websockets(app: web.Application) -> None:
        # Runs before the server waits for open requests: a websocket never ends by itself.
        app[DRAINING].set()  # /readyz answers 503 from now on
        if HUB in app:
            app[HUB].disconnect_all()

    app.on_shutdown.append(close_websockets)
    add_routes(app)
    app[OPENAPI] = openapi_document()  # built here, not by the view: no import circle
    add_ops_routes(app)
    app.router.add_static("/assets/", STATIC_DIR, append_version=False)
    return app
