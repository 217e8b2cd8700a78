"""Typed keys of what the app holds (pool, redis, hub...), set up by cleanup contexts in main."""

from __future__ import annotations

from typing import Any

import asyncpg
from aiohttp import web
from redis.asyncio import Redis

from app.config import Settings
from app.passwords import Passwords
from app.presence import Presence
from app.ratelimit import RateLimiter
from app.tenancy import CommunityResolver
from realtime.hub import Hub
from storage.blobs import BlobStore
from storage.redis import RedisHealth

SETTINGS = web.AppKey("settings", Settings)
POOL = web.AppKey("pool", asyncpg.Pool)
REDIS = web.AppKey("redis", Redis)
REDIS_HEALTH = web.AppKey("redis_health", RedisHealth)
PASSWORDS = web.AppKey("passwords", Passwords)
LIMITER = web.AppKey("limiter", RateLimiter)
COMMUNITIES = web.AppKey("communities", CommunityResolver)
HUB = web.AppKey("hub", Hub)
# a Protocol too (app.presence): who has a live realtime connection
PRESENCE: web.AppKey[Presence] = web.AppKey("presence")
# a Protocol: annotated, since AppKey(name, t) wants a concrete class
BLOBS: web.AppKey[BlobStore] = web.AppKey("blobs")
# the OpenAPI document (app.openapi), built once at app start from the route table
OPENAPI = web.AppKey("openapi", dict)


def pool_of(request: web.Request) -> asyncpg.Pool:
    return request.app[POOL]


def hub_of(request: web.Request) -> Hub:
    return request.app[HUB]


def presence_of(request: web.Request) -> Presence:
    return request.app[PRESENCE]


def blobs_of(request: web.Request) -> BlobStore:
    return request.app[BLOBS]


def openapi_of(request: web.Request) -> dict[str, Any]:
    return request.app[OPENAPI]


def settings_of(request: web.Request) -> Settings:
    return request.app[SETTINGS]
