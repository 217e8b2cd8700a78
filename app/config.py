"""Settings: one typed object read from the environment (documented in the README)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from push.settings import WorkerSettings


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    return raw in {"1", "true", "yes", "on"}


def _str(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name, "").strip()
    return raw or None


@dataclass(frozen=True)
class S3Settings:
    endpoint_url: str | None
    bucket: str
    access_key_id: str | None
    secret_access_key: str | None
    region: str


@dataclass(frozen=True)
class ApnsSettings:
    key_file: str | None
    key_id: str | None
    team_id: str | None
    topic: str | None
    use_sandbox: bool
    # an HTTP CONNECT proxy for APNs (APNS_PROXY, "http://host:port" or "host:port")
    proxy: str | None = None


@dataclass(frozen=True)
class FcmSettings:
    project_id: str | None
    credentials_file: str | None
    # the FCM HTTP v1 base URL (FCM_API_URL); None: https://fcm.googleapis.com
    api_url: str | None = None


@dataclass(frozen=True)
class Argon2Settings:
    """Argon2id cost. Defaults are RFC 9106's low-memory profile."""

    time_cost: int = 3
    memory_kib: int = 65536
    parallelism: int = 4


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    redis_url: str | None = None
    redis_prefix: str = "commons"
    data_dir: Path = Path(".data")
    secret_key: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    db_pool_size: int = 10
    # PostgreSQL away: a new connection gives up after connect, a request waiting for a free
    # connection after acquire; both answer 503 unavailable.
    db_connect_timeout_seconds: float = 5.0
    db_acquire_timeout_seconds: float = 10.0
    # every Redis call gives up after this (then the process-local fallback)
    redis_timeout_seconds: float = 0.5
    rate_limit_requests: int = 600
    rate_limit_failed_logins: int = 10
    rate_limit_webhooks: int = 60
    max_upload_bytes: int = 100 * 1024 * 1024
    credentials_cache_seconds: int = 300
    realtime_queue_frames: int = 1024
    realtime_heartbeat_seconds: float = 30.0
    # bytes queued for one websocket (in the process and in its socket's send buffer) before
    # a reader that does not keep up is cut
    realtime_queue_bytes: int = 1024 * 1024
    # deadline for a connection to send a whole request head; per-process connection cap
    head_timeout_seconds: float = 30.0
    max_connections: int = 10_000
    trust_forwarded: bool = False
    # proxies in front of the app that append to X-Forwarded-For (app/proxy.py)
    trusted_proxy_hops: int = 1
    log_level: str = "INFO"
    # "text" (human) or "json" (one object per line; one line per request)
    log_format: str = "text"
    # who may read /metrics: client networks (CIDRs), or anyone sending the bearer token
    metrics_allow: tuple[str, ...] = ("127.0.0.0/8", "::1/128")
    metrics_token: str | None = None
    # seconds SIGTERM/SIGINT waits for in-flight requests before closing what is left
    shutdown_timeout: float = 10.0
    argon2: Argon2Settings = field(default_factory=Argon2Settings)
    s3: S3Settings | None = None
    apns: ApnsSettings | None = None
    fcm: FcmSettings | None = None
    push: WorkerSettings = field(default_factory=WorkerSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        s3 = None
        if _str(env, "S3_ENDPOINT_URL") or _str(env, "S3_BUCKET"):
            s3 = S3Settings(
                endpoint_url=_str(env, "S3_ENDPOINT_URL"),
                bucket=_str(env, "S3_BUCKET") or "commons",
                access_key_id=_str(env, "AWS_ACCESS_KEY_ID"),
                secret_access_key=_str(env, "AWS_SECRET_ACCESS_KEY"),
                region=_str(env, "AWS_REGION") or "us-east-1",
            )
        apns = None
        if _str(env, "APNS_KEY_FILE"):
            apns = ApnsSettings(
                key_file=_str(env, "APNS_KEY_FILE"),
                key_id=_str(env, "APNS_KEY_ID"),
                team_id=_str(env, "APNS_TEAM_ID"),
                topic=_str(env, "APNS_TOPIC"),
                use_sandbox=_bool(env, "APNS_USE_SANDBOX", False),
                proxy=_str(env, "APNS_PROXY"),
            )
        fcm = None
        if _str(env, "FCM_CREDENTIALS_FILE"):
            fcm = FcmSettings(
                project_id=_str(env, "FCM_PROJECT_ID"),
                credentials_file=_str(env, "FCM_CREDENTIALS_FILE"),
                api_url=_str(env, "FCM_API_URL"),
            )
        return cls(
            database_url=_str(env, "DATABASE_URL"),
            redis_url=_str(env, "REDIS_URL"),
            redis_prefix=_str(env, "COMMONS_REDIS_PREFIX") or "commons",
            data_dir=Path(_str(env, "COMMONS_DATA_DIR") or ".data"),
            secret_key=_str(env, "COMMONS_SECRET_KEY"),
            host=_str(env, "COMMONS_HOST") or "127.0.0.1",
            port=_int(env, "COMMONS_PORT", 8080),
            db_pool_size=_int(env, "COMMONS_DB_POOL_SIZE", 10),
            db_connect_timeout_seconds=_float(env, "COMMONS_DB_CONNECT_TIMEOUT_SECONDS", 5.0),
            db_acquire_timeout_seconds=_float(env, "COMMONS_DB_ACQUIRE_TIMEOUT_SECONDS", 10.0),
            redis_timeout_seconds=_float(env, "COMMONS_REDIS_TIMEOUT_SECONDS", 0.5),
            rate_limit_requests=_int(env, "COMMONS_RATE_LIMIT_REQUESTS", 600),
            rate_limit_failed_logins=_int(env, "COMMONS_RATE_LIMIT_FAILED_LOGINS", 10),
            rate_limit_webhooks=_int(env, "COMMONS_RATE_LIMIT_WEBHOOKS", 60),
            max_upload_bytes=_int(env, "COMMONS_MAX_UPLOAD_MB", 100) * 1024 * 1024,
            credentials_cache_seconds=_int(env, "COMMONS_CREDENTIALS_CACHE_SECONDS", 300),
            realtime_queue_frames=_int(env, "COMMONS_REALTIME_QUEUE_FRAMES", 1024),
            realtime_heartbeat_seconds=float(_int(env, "COMMONS_REALTIME_HEARTBEAT_SECONDS", 30)),
            realtime_queue_bytes=_int(env, "COMMONS_REALTIME_QUEUE_BYTES", 1024 * 1024),
            head_timeout_seconds=_float(env, "COMMONS_HEAD_TIMEOUT_SECONDS", 30.0),
            max_connections=_int(env, "COMMONS_MAX_CONNECTIONS", 10_000),
            trust_forwarded=_bool(env, "COMMONS_TRUST_FORWARDED", False),
            trusted_proxy_hops=_int(env, "COMMONS_TRUSTED_PROXY_HOPS", 1),
            log_level=_str(env, "COMMONS_LOG_LEVEL") or "INFO",
            log_format=(_str(env, "COMMONS_LOG_FORMAT") or "text").lower(),
            metrics_allow=tuple(
                part.strip() for part in
                (_str(env, "COMMONS_METRICS_ALLOW") or "127.0.0.0/8,::1/128").split(",")
                if part.strip()
            ),
            metrics_token=_str(env, "COMMONS_METRICS_TOKEN"),
            shutdown_timeout=float(_int(env, "COMMONS_SHUTDOWN_TIMEOUT", 10)),
            argon2=Argon2Settings(
                time_cost=_int(env, "COMMONS_ARGON2_TIME_COST", 3),
                memory_kib=_int(env, "COMMONS_ARGON2_MEMORY_KIB", 65536),
                parallelism=_int(env, "COMMONS_ARGON2_PARALLELISM", 4),
            ),
            s3=s3,
            apns=apns,
            fcm=fcm,
            push=WorkerSettings(
                batch_size=_int(env, "PUSH_BATCH_SIZE", 100),
                concurrency=_int(env, "PUSH_CONCURRENCY", 32),
                lease=_float(env, "PUSH_LEASE_SECONDS", 60.0),
                backoff_min=_float(env, "PUSH_BACKOFF_MIN_SECONDS", 1.0),
                backoff_max=_float(env, "PUSH_BACKOFF_MAX_SECONDS", 3600.0),
                give_up=_float(env, "PUSH_GIVE_UP_SECONDS", 86400.0),
                badge_interval=_float(env, "PUSH_BADGE_INTERVAL_SECONDS", 5.0),
            ),
        )

    def with_database(self, database_url: str) -> Settings:
        return replace(self, database_url=database_url)
