"""The import contract (docs/CONTRIBUTING.md, "Layers"), checked over the source tree.

Module-level imports only (an import inside a function, or under `if TYPE_CHECKING:`, runs
later or never, and is what breaks a circle when one is needed). The checker is run on the
real tree, and on synthetic trees to show it finds what it must.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "storage", "realtime", "push", "migrations")


@dataclass(frozen=True)
class Rule:
    """Modules under `importer` may not import modules under any of `forbidden`, except
    those under `allowed`."""

    importer: str
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    why: str = ""


RULES = (
    Rule("app.views", ("storage", "push"),
         why="views call actions (app/actions, app/access), never storage or push"),
    Rule("app.actions", ("app.views", "app.routes", "app.main"),
         why="actions know nothing of HTTP routing"),
    Rule("app.render", ("app.views", "app.actions"), why="render shapes rows, it loads nothing"),
    Rule("storage", ("app", "realtime", "push"), why="storage is the bottom layer"),
    # app.metrics is a leaf (it imports nothing of ours): the hub and sockets count into it
    Rule("realtime", ("app", "push"), allowed=("app.metrics",),
         why="realtime sits on storage, under app"),
    Rule("push", ("app", "realtime"), why="push sits on storage, under app"),
)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: the top level, and inside if/try/with blocks
    there (not functions or classes' methods, not `if TYPE_CHECKING:`)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node):
                yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(h.body for h in node.handlers)):
                yield from _module_level(block)
        elif isinstance(node, ast.With):
            yield from _module_level(node.body)


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """{module: the modules of ours it imports at module level}."""
    files = {module_name(root, p): p for package in packages
             for p in sorted((root / package).rglob("*.py"))}
    known = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        imported: set[str] = set()
        for node in _module_level(ast.parse(path.read_text(), str(path)).body):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the module's package
                    package = module.split(".")
                    package = package[:len(package) - node.level + (1 if is_package else 0)]
                    base = ".".join([*package, base] if base else package)
                # `from a import b`: the submodule a.b when there is one, else a itself
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                         for alias in node.names]
            imported |= {name for name in names if name in known and name != module}
        graph[module] = imported
    return graph


def violations(graph: dict[str, set[str]], rules: tuple[Rule, ...] = RULES) -> list[str]:
    out = []
    for module, imported in sorted(graph.items()):
        for rule in rules:
            if not _under(module, rule.importer):
                continue
            for target in sorted(imported):
                if any(_under(target, f) for f in rule.forbidden) and not any(
                        _under(target, a) for a in rule.allowed):
                    out.append(f"{module} imports {target}: {rule.why}")
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# --- the real tree -----------------------------------------------------------------------


def test_the_source_tree_keeps_the_layers() -> None:
    graph = import_graph(ROOT, PACKAGES)
    assert len(graph) > 100 and "app.views.messages" in graph  # the tree was really read
    assert violations(graph) == []


def test_the_source_tree_has_no_import_circle() -> None:
    assert cycles(import_graph(ROOT, PACKAGES)) == []


def test_app_metrics_is_a_leaf() -> None:
    """Why realtime may import it: it cannot lead back up into app."""
    assert import_graph(ROOT, PACKAGES)["app.metrics"] == set()


# --- the checker finds what it must (synthetic trees) ---------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_view_importing_storage_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "app/__init__.py": "",
        "app/views/__init__.py": "",
        "app/views/things.py": "from storage import things\nfrom storage.db import Conn\n",
        "app/views/fine.py": "def f():\n    from storage import things  # late: not counted\n",
        "app/actions/__init__.py": "",
        "app/actions/things.py": "from app.views import things\n",
        "storage/__init__.py": "",
        "storage/db.py": "",
        "storage/things.py": "import realtime.hub\n",
        "realtime/__init__.py": "",
        "realtime/hub.py": "from app import metrics\nfrom app.actions import things\n",
        "app/metrics.py": "",
    })
    graph = import_graph(root, ("app", "storage", "realtime"))
    assert graph["app.views.things"] == {"storage.things", "storage.db"}
    assert graph["app.views.fine"] == set()
    assert violations(graph) == [
        "app.actions.things imports app.views.things: actions know nothing of HTTP routing",
        "app.views.things imports storage.db: views call actions (app/actions, app/access), "
        "never storage or push",
        "app.views.things imports storage.things: views call actions (app/actions, "
        "app/access), never storage or push",
        "realtime.hub imports app.actions.things: realtime sits on storage, under app",
        "storage.things imports realtime.hub: storage is the bottom layer",
    ]


def test_an_import_circle_is_found_anywhere(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "app/__init__.py": "",
        "app/openapi.py": "from app.routes import ROUTES\n",
        "app/routes.py": "from app.views import meta\n",
        "app/views/__init__.py": "",
        "app/views/meta.py": "from . import other\nfrom ..openapi import document\n",
        "app/views/other.py": "",
        "app/late.py": "def f():\n    import app.early\n",
        "app/early.py": "import app.late\n",
        "app/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        "    import app.hinted\n",
        "app/hinted.py": "import app.typed\n",
    })
    graph = import_graph(root, ("app",))
    assert graph["app.views.meta"] == {"app.views.other", "app.openapi"}
    assert cycles(graph) == [["app.openapi", "app.routes", "app.views.meta"]]
