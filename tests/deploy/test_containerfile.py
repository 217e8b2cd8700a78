"""deploy/Containerfile, the systemd units and deploy/commons.env.example hold together with the
package they install: what they copy exists and is every package pyproject.toml ships, what
they run is a real `commons` command line, what they set is a setting Commons reads and
accepts, and the stop timeouts leave room for the drain.

Nothing here builds or runs a container: there is no container runtime on the test machines
(docs/operations.md, "What the tests cannot show"). tests/deploy/test_nginx.py runs the same
processes without containers."""

from __future__ import annotations

import configparser
import json
import re
import shlex
import tomllib
from typing import Any

import pytest
import yaml

from app.checks import check_static
from app.cli import build_parser
from app.config import Settings
from tests.servers import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
PYPROJECT: dict[str, Any] = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
SETTINGS_READ = set(re.findall(
    r'"((?:COMMONS|S3|AWS|APNS|FCM|PUSH)_[A-Z0-9_]+|DATABASE_URL|REDIS_URL)"',
    (REPO_ROOT / "app" / "config.py").read_text()))


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Containerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Containerfile").read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def _of(kind: str) -> list[str]:
    return [rest for word, rest in instructions() if word == kind]


def assert_commons_command(argv: list[str], subcommand: str | None = None) -> None:
    """`argv` is the installed `commons` script with arguments its parser accepts."""
    assert argv[0].rsplit("/", 1)[-1] == "commons", argv
    assert PYPROJECT["project"]["scripts"]["commons"] == "app.cli:main"
    try:
        args = build_parser().parse_args(argv[1:])
    except SystemExit:
        pytest.fail(f"not a valid commons command line: {argv}")
    if subcommand is not None:
        assert args.command == subcommand, argv


def test_the_base_image_has_a_python_the_package_supports() -> None:
    (base,) = _of("FROM")
    match = re.fullmatch(r"(?:docker\.io/(?:library/)?)?python:(\d+)\.(\d+)-slim", base)
    assert match, base
    least = re.fullmatch(r">=(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert least
    assert (int(match[1]), int(match[2])) >= (int(least[1]), int(least[2]))


def test_it_copies_every_package_and_installs_them() -> None:
    copied = set()
    for rest in _of("COPY"):
        *sources, _target = rest.split()
        for source in sources:
            assert (REPO_ROOT / source).exists(), source
            copied.add(source)
    packages = {p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]
                ["include"]}
    assert packages <= copied, packages - copied
    assert {"pyproject.toml", PYPROJECT["project"]["readme"]} <= copied
    assert any(re.search(r"\bpip install\b.*\s\.(\s|$)", run + " ") for run in _of("RUN"))


def test_its_command_is_commons_serve() -> None:
    (cmd,) = _of("CMD")
    argv = json.loads(cmd)  # the exec form: SIGTERM reaches commons, not a shell
    assert_commons_command(argv, "serve")
    assert "--no-bootstrap" in argv  # no local admin on a shared database
    assert not _of("ENTRYPOINT")


def test_its_environment_and_port_are_settings_commons_reads() -> None:
    env: dict[str, str] = {}
    for rest in _of("ENV"):
        env.update(dict(pair.split("=", 1) for pair in shlex.split(rest)))
    assert set(env) <= SETTINGS_READ, set(env) - SETTINGS_READ
    settings = Settings.from_env(env)
    assert settings.host == "0.0.0.0"  # reachable from outside the container
    (port,) = _of("EXPOSE")
    assert int(port) == settings.port


def test_every_compose_command_is_a_commons_command_line() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    ran = {}
    for name, service in compose["services"].items():
        command = service.get("command")
        if isinstance(command, list) and command[0] == "commons":
            assert_commons_command(command)
            ran[name] = command[1]
    assert ran == {"migrate": "migrate", "app1": "serve", "app2": "serve", "worker": "worker"}


def test_the_readme_compose_walkthrough_runs_commons_command_lines() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Running on several machines"):]
    section = section[:section.index("\n## ", 5)]
    lines = re.sub(r"\\\n\s*", " ", section).splitlines()
    runs = [shlex.split(line)[line.split().index("app1") + 1:] for line in lines
            if "compose -f deploy/compose.yaml run" in line]
    assert runs, "the README no longer runs a command in a compose service"
    for argv in runs:
        assert_commons_command(argv)


# -- systemd ---------------------------------------------------------------------------------


def _unit(name: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string((DEPLOY / "systemd" / name).read_text())
    return unit


def _example_env() -> dict[str, str]:
    """deploy/commons.env.example, the commented-out settings too."""
    env = {}
    for line in (DEPLOY / "commons.env.example").read_text().splitlines():
        match = re.fullmatch(r"#?\s*([A-Z][A-Z0-9_]*)=(.*)", line.strip())
        if match:
            env[match[1]] = match[2]
    return env


@pytest.mark.parametrize(("unit", "subcommand"),
                         [("commons.service", "serve"), ("commons-worker.service", "worker")])
def test_systemd_units_run_commons_with_the_example_environment(
    unit: str, subcommand: str
) -> None:
    service = _unit(unit)["Service"]
    assert_commons_command(shlex.split(service["ExecStart"]), subcommand)
    header = (DEPLOY / "commons.env.example").read_text().splitlines()[0]
    assert service["EnvironmentFile"] in header  # the path the example says to copy it to
    # time to drain (COMMONS_SHUTDOWN_TIMEOUT) before systemd kills what is left
    shutdown = float(_example_env()["COMMONS_SHUTDOWN_TIMEOUT"])
    assert float(service["TimeoutStopSec"]) > shutdown


def test_the_example_environment_is_settings_commons_reads_and_accepts() -> None:
    env = _example_env()
    assert set(env) <= SETTINGS_READ, set(env) - SETTINGS_READ
    check_static(Settings.from_env({k: v for k, v in env.items() if v and not
                                    k.startswith(("APNS_", "FCM_"))}))


def test_compose_leaves_time_to_drain() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name in ("app1", "app2", "worker"):
        service = compose["services"][name]
        grace = float(str(service["stop_grace_period"]).removesuffix("s"))
        assert grace > float(service["environment"]["COMMONS_SHUTDOWN_TIMEOUT"]), name
