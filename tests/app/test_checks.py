"""Settings checked at start: `serve`, `migrate` and `worker` given a bad setting print one
readable line and exit non-zero, never a traceback; a secret in the setting is not echoed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.checks import SettingsError, check_static
from app.config import Settings
from tests.app.test_cli import commons
from tests.servers import ensure_s3, free_port

BAD = [
    ({"DATABASE_URL": "mysql://u:hunter2@db/x"}, "DATABASE_URL must start with"),
    ({"DATABASE_URL": f"postgresql://u:hunter2@127.0.0.1:{free_port()}/x"},
     "DATABASE_URL: cannot connect to PostgreSQL at 127.0.0.1:"),
    ({"REDIS_URL": "http://cache:6379"}, "REDIS_URL must start with"),
    ({"REDIS_URL": f"redis://:hunter2@127.0.0.1:{free_port()}/0"},
     "REDIS_URL: cannot reach Redis at 127.0.0.1:"),
    ({"S3_ENDPOINT_URL": "s3.internal:9000"}, "S3_ENDPOINT_URL must start with"),
    ({"S3_BUCKET": "Not_A_Bucket"}, "S3_BUCKET 'Not_A_Bucket' is not a valid bucket name"),
    ({"S3_BUCKET": "ok-bucket", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": ""},
     "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together"),
    ({"APNS_KEY_FILE": "/nonexistent/key.p8"}, "APNS_KEY_FILE '/nonexistent/key.p8' is not"),
    ({"FCM_CREDENTIALS_FILE": "/nonexistent/fcm.json"}, "FCM_CREDENTIALS_FILE"),
    ({"COMMONS_PORT": "eighty"}, "COMMONS_PORT must be an integer"),
    ({"COMMONS_METRICS_ALLOW": "10.0.0.0/8,intranet"}, "COMMONS_METRICS_ALLOW: 'intranet'"),
    ({"PUSH_CONCURRENCY": "0"}, "PUSH_CONCURRENCY must be more than 0"),
    ({"PUSH_BACKOFF_MIN_SECONDS": "10", "PUSH_BACKOFF_MAX_SECONDS": "5"},
     "PUSH_BACKOFF_MAX_SECONDS must be at least PUSH_BACKOFF_MIN_SECONDS"),
    ({"PUSH_LEASE_SECONDS": "soon"}, "PUSH_LEASE_SECONDS must be a number"),
]


@pytest.mark.parametrize("command", ["serve", "migrate", "worker"])
@pytest.mark.parametrize(("env", "message"), BAD[:4])
async def test_bad_service_urls_are_one_line(
    database_url: str, command: str, env: dict[str, str], message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _assert_one_line(database_url, command, env, message, monkeypatch)


@pytest.mark.parametrize(("env", "message"), BAD[4:])
async def test_other_bad_settings_are_one_line(
    database_url: str, env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _assert_one_line(database_url, "serve", env, message, monkeypatch)


async def _assert_one_line(
    database_url: str, command: str, env: dict[str, str], message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("S3_ENDPOINT_URL", "S3_BUCKET", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = {"serve": ["serve", "--port", str(free_port())], "migrate": ["migrate"],
            "worker": ["worker", "--once"]}[command]
    code, out, err = await commons(env.get("DATABASE_URL", database_url), *args)
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert message in lines[0], err
    assert "Traceback" not in err
    assert "hunter2" not in err + out


def _s3(**changes: str) -> dict[str, str]:
    """The test suite's S3 settings, changed."""
    return {**ensure_s3().env(), **changes}


S3_BAD = [
    (_s3(S3_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}"),
     "S3_ENDPOINT_URL: cannot reach S3 at 127.0.0.1:"),
    (_s3(S3_BUCKET="no-such-bucket"),
     "S3_BUCKET: bucket 'no-such-bucket' does not exist at 127.0.0.1:"),
    (_s3(AWS_SECRET_ACCESS_KEY="hunter2"),
     "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: S3 at 127.0.0.1:"),
]


@pytest.mark.parametrize("command", ["serve", "worker"])
@pytest.mark.parametrize(("env", "message"), S3_BAD)
async def test_s3_that_does_not_answer_is_one_line(
    database_url: str, command: str, env: dict[str, str], message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reached with HeadBucket at start: unreachable, no such bucket, or the keys refused."""
    await _assert_one_line(database_url, command, env, message, monkeypatch)


async def test_migrate_does_not_need_s3(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It does not use S3, and a deployment may migrate before its bucket exists."""
    for name, value in S3_BAD[0][0].items():
        monkeypatch.setenv(name, value)
    code, out, err = await commons(database_url, "migrate")
    assert code == 0, err
    assert out.startswith("applied: nothing")


def test_a_good_fcm_file_passes(tmp_path: Path) -> None:
    key = tmp_path / "fcm.json"
    key.write_text(json.dumps({"project_id": "p", "type": "service_account"}))
    check_static(Settings.from_env({"FCM_CREDENTIALS_FILE": str(key)}))
    key.write_text("not json")
    with pytest.raises(SettingsError, match="not a JSON service account key"):
        check_static(Settings.from_env({"FCM_CREDENTIALS_FILE": str(key)}))
