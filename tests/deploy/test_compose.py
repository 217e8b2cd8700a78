"""deploy/compose.yaml holds together: every service the README walks through, the app and the
worker built from the Containerfile with the same settings, each setting one Commons reads and
checks, the files it mounts present, and its nginx the shipped one but for the upstreams and
the listener. (No container runtime on the test box: tests/deploy/test_nginx.py runs the same
nginx configuration for real.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.checks import check_static
from app.config import Settings
from tests.servers import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
APPS = ("app1", "app2")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return data


def _env(service: dict[str, Any]) -> dict[str, str]:
    """The environment as compose gives it, ${VAR:-default} and ${VAR:?error} resolved to a
    stand-in value."""
    def resolve(value: Any) -> str:
        return re.sub(r"\$\{(\w+)(?::[-?]([^}]*))?\}",
                      lambda m: m.group(2) if m.group(0).startswith("${" + m.group(1) + ":-")
                      else f"stand-in-{m.group(1).lower()}", str(value))
    return {k: resolve(v) for k, v in service["environment"].items()}


def test_every_service_is_there(compose: dict[str, Any]) -> None:
    assert {"postgres", "redis", "seaweedfs", "buckets", "migrate", *APPS, "worker",
            "nginx"} <= set(compose["services"])


def test_app_and_worker_are_built_from_the_containerfile(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in (*APPS, "worker", "migrate"):
        build = services[name]["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == \
            (DEPLOY / "Containerfile").resolve()
    assert services["worker"]["command"] == ["commons", "worker"]
    for name in APPS:
        command = services[name]["command"]
        assert command[:2] == ["commons", "serve"] and "--workers" in command
        assert "/readyz" in " ".join(services[name]["healthcheck"]["test"])


def test_every_process_has_the_same_settings_and_they_pass_the_start_checks(
    compose: dict[str, Any]
) -> None:
    services = compose["services"]
    envs = [_env(services[name]) for name in (*APPS, "worker", "migrate")]
    assert all(env == envs[0] for env in envs)
    env = envs[0]
    assert env["DATABASE_URL"].startswith("postgresql://commons:")
    assert "@postgres:5432/" in env["DATABASE_URL"]
    assert env["REDIS_URL"] == "redis://redis:6379/0"
    assert env["S3_ENDPOINT_URL"] == "http://seaweedfs:8333"
    assert env["COMMONS_TRUST_FORWARDED"] == "true"
    assert env["COMMONS_SECRET_KEY"] == "stand-in-commons_secret_key"  # must be given
    settings = Settings.from_env(env)
    check_static(settings)  # the same checks `commons serve` runs first
    assert settings.log_format == "json"


def test_s3_credentials_match_the_seaweedfs_identity(compose: dict[str, Any]) -> None:
    import json

    env = _env(compose["services"]["app1"])
    identities = json.loads((DEPLOY / "compose" / "seaweedfs-s3.json").read_text())
    credentials = identities["identities"][0]["credentials"][0]
    assert credentials == {"accessKey": env["AWS_ACCESS_KEY_ID"],
                           "secretKey": env["AWS_SECRET_ACCESS_KEY"]}


def test_mounted_files_exist(compose: dict[str, Any]) -> None:
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (DEPLOY / source).is_file(), source


# what may differ between the two: the upstream machines, and the listener (TLS or not)
_OWN = re.compile(r"^(server \S+;|listen .*;|server_name .*;|ssl_\w+ .*;)$")


def _directives(conf: str) -> list[str]:
    """Every directive and block line, in order, without comments, blank lines or what the
    compose file may change (_OWN)."""
    lines = (line.split("#", 1)[0].strip() for line in conf.splitlines())
    return [line for line in lines if line and not _OWN.match(line)]


def test_compose_nginx_is_the_shipped_one_with_compose_upstreams(compose: dict[str, Any]) -> None:
    shipped = (DEPLOY / "nginx.conf").read_text()
    ours = (DEPLOY / "compose" / "nginx.conf").read_text()
    assert _directives(ours) == _directives(shipped)
    assert "keepalive_timeout 20s;" in _directives(ours)  # the upstream block is compared too
    upstreams = re.findall(r"(?m)^\s*server (\S+);", ours)
    assert upstreams == [f"{name}:8080" for name in APPS]
    for name in APPS:
        assert "--port" in compose["services"][name]["command"]
        assert "8080" in compose["services"][name]["command"]
    for directive in ("client_max_body_size 101m;", "proxy_request_buffering off;",
                      "X-Forwarded-For $proxy_add_x_forwarded_for;"):
        assert directive in ours


def test_readme_walks_through_compose() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Running on several machines"):]
    section = section[:section.index("\n## ", 5)]
    assert "deploy/compose.yaml" in section
    assert "compose -f deploy/compose.yaml up" in section


def test_every_setting_is_in_the_readme() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    source = (REPO_ROOT / "app" / "config.py").read_text()
    names = set(re.findall(
        r'"((?:COMMONS|S3|AWS|APNS|FCM|PUSH)_[A-Z0-9_]+|DATABASE_URL|REDIS_URL)"', source))
    missing = sorted(n for n in names if f"`{n}`" not in readme)
    assert not missing, f"settings missing from the README: {missing}"


def test_deploy_paths_in_the_readme_exist() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    for path in set(re.findall(r"`(deploy/[\w./-]+)`", readme)):
        assert (REPO_ROOT / Path(path)).exists(), path
