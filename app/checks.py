"""Settings checked before `serve`, `migrate` and `worker` start.

A mistake in the environment is reported as one readable line naming the setting (secrets
redacted) and a non-zero exit, never as a traceback from deep inside a driver.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from urllib.parse import urlsplit

from app.config import S3Settings, Settings
from app.logs import redact

CONNECT_TIMEOUT = 5.0
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class SettingsError(Exception):
    """One line for the operator: which setting, and what is wrong with it."""


def _url(name: str, raw: str, schemes: set[str]) -> None:
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise SettingsError(f"{name} is not a valid URL: {exc}") from None
    if parts.scheme not in schemes:
        raise SettingsError(
            f"{name} must start with {' or '.join(sorted(s + '://' for s in schemes))}, "
            f"got {redact(raw)!r}"
        )
    if parts.scheme not in {"unix"} and not parts.hostname and "host=" not in parts.query:
        raise SettingsError(f"{name} has no host: {redact(raw)!r}")


def check_static(settings: Settings) -> None:
    """What can be told without the network."""
    if settings.database_url:
        _url("DATABASE_URL", settings.database_url, {"postgres", "postgresql"})
    if settings.redis_url:
        _url("REDIS_URL", settings.redis_url, {"redis", "rediss", "unix"})
    if settings.log_format not in {"text", "json"}:
        raise SettingsError(f"COMMONS_LOG_FORMAT must be text or json, got "
                            f"{settings.log_format!r}")
    if not settings.head_timeout_seconds > 0:  # also NaN; inf is "no deadline", allowed
        raise SettingsError(f"COMMONS_HEAD_TIMEOUT_SECONDS must be more than 0, got "
                            f"{settings.head_timeout_seconds}")
    if settings.max_connections < 0:
        raise SettingsError(f"COMMONS_MAX_CONNECTIONS must be 0 (no cap) or more, got "
                            f"{settings.max_connections}")
    import ipaddress

    for network in settings.metrics_allow:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise SettingsError(
                f"COMMONS_METRICS_ALLOW: {network!r} is not a network (e.g. 10.0.0.0/8)"
            ) from None
    s3 = settings.s3
    if s3 is not None:
        if s3.endpoint_url:
            _url("S3_ENDPOINT_URL", s3.endpoint_url, {"http", "https"})
        if not _BUCKET_RE.match(s3.bucket):
            raise SettingsError(f"S3_BUCKET {s3.bucket!r} is not a valid bucket name")
        if bool(s3.access_key_id) != bool(s3.secret_access_key):
            raise SettingsError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together: "
                                "set both or neither")
    apns = settings.apns
    if apns is not None:
        _readable("APNS_KEY_FILE", apns.key_file)
        missing = [n for n, v in (("APNS_KEY_ID", apns.key_id), ("APNS_TEAM_ID", apns.team_id),
                                  ("APNS_TOPIC", apns.topic)) if not v]
        if missing:
            raise SettingsError(f"APNS_KEY_FILE is set but {', '.join(missing)} is not")
        if apns.proxy:
            from push.apns import parse_proxy

            try:
                parse_proxy(apns.proxy)
            except ValueError as exc:
                raise SettingsError(str(exc)) from None
    push = settings.push
    for name, value in (("PUSH_BATCH_SIZE", push.batch_size),
                        ("PUSH_CONCURRENCY", push.concurrency),
                        ("PUSH_LEASE_SECONDS", push.lease),
                        ("PUSH_BACKOFF_MIN_SECONDS", push.backoff_min),
                        ("PUSH_GIVE_UP_SECONDS", push.give_up)):
        if value <= 0:
            raise SettingsError(f"{name} must be more than 0, got {value}")
    if push.backoff_max < push.backoff_min:
        raise SettingsError("PUSH_BACKOFF_MAX_SECONDS must be at least PUSH_BACKOFF_MIN_SECONDS")
    if push.badge_interval < 0:
        raise SettingsError("PUSH_BADGE_INTERVAL_SECONDS must not be negative")
    fcm = settings.fcm
    if fcm is not None:
        _readable("FCM_CREDENTIALS_FILE", fcm.credentials_file)
        assert fcm.credentials_file
        try:
            with open(fcm.credentials_file, encoding="utf-8") as handle:
                data = json.load(handle)
        except ValueError:
            raise SettingsError(
                f"FCM_CREDENTIALS_FILE {fcm.credentials_file} is not a JSON service account key"
            ) from None
        if not isinstance(data, dict) or not (fcm.project_id or data.get("project_id")):
            raise SettingsError("FCM_PROJECT_ID is not set and FCM_CREDENTIALS_FILE has no "
                                "project_id")
        if fcm.api_url:
            _url("FCM_API_URL", fcm.api_url, {"http", "https"})


def _readable(name: str, path: str | None) -> None:
    if not path or not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise SettingsError(f"{name} {path!r} is not a readable file")


async def _check_postgres(dsn: str) -> None:
    import asyncpg

    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT)
    except Exception as exc:
        raise SettingsError(f"DATABASE_URL: cannot connect to PostgreSQL at "
                            f"{_where(dsn)}: {_reason(exc)}") from None
    await conn.close()


async def _check_redis(url: str) -> None:
    from redis.asyncio import Redis

    client = Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT,
                            socket_timeout=CONNECT_TIMEOUT)
    try:
        await client.ping()
    except Exception as exc:
        raise SettingsError(f"REDIS_URL: cannot reach Redis at {_where(url)}: "
                            f"{_reason(exc)}") from None
    finally:
        await client.aclose()


async def _check_s3(s3: S3Settings) -> None:
    """The bucket answers HeadBucket with these keys: S3 is reachable, the bucket exists (Commons
    does not create buckets) and the keys may use it."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from storage.blobs import open_s3_client

    where = _where(s3.endpoint_url) if s3.endpoint_url else f"AWS S3 ({s3.region})"
    try:
        async with asyncio.timeout(2 * CONNECT_TIMEOUT):
            async with open_s3_client(s3, connect_timeout=CONNECT_TIMEOUT,
                                      read_timeout=CONNECT_TIMEOUT, attempts=1) as client:
                await client.head_bucket(Bucket=s3.bucket)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in {"404", "NoSuchBucket"} or status == 404:
            raise SettingsError(f"S3_BUCKET: bucket {s3.bucket!r} does not exist at {where} "
                                f"(Commons does not create it)") from None
        if code in {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"} \
                or status == 403:
            raise SettingsError(f"AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: S3 at {where} "
                                f"refused access to bucket {s3.bucket!r} ({code or status})"
                                ) from None
        raise SettingsError(f"S3_BUCKET: S3 at {where} answered {code or status} for bucket "
                            f"{s3.bucket!r}") from None
    except NoCredentialsError:
        raise SettingsError("AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: S3 is configured but "
                            "no credentials were found") from None
    except (BotoCoreError, OSError, TimeoutError) as exc:
        setting = "S3_ENDPOINT_URL" if s3.endpoint_url else "AWS_REGION"
        raise SettingsError(f"{setting}: cannot reach S3 at {where}: {_reason(exc)}") from None


def _where(url: str) -> str:
    try:
        parts = urlsplit(url)
        return f"{parts.hostname or 'localhost'}:{parts.port or 'default port'}"
    except ValueError:
        return "?"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return redact(f"{name}: {text}" if text else name)[:300]


async def check_services(settings: Settings, *, s3: bool = True) -> None:
    """PostgreSQL (always), Redis and S3 (when configured) answer. `migrate` passes s3=False:
    it does not use S3, and a deployment may migrate before its bucket exists."""
    if settings.database_url:
        await _check_postgres(settings.database_url)
    if settings.redis_url:
        await _check_redis(settings.redis_url)
    if s3 and settings.s3 is not None:
        await _check_s3(settings.s3)
