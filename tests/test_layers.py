"""The package's shape: every import of every module (at the top, inside functions, and for typing only) goes to
its own layer or one below, there is no import cycle anywhere, and no module uses another's private names; no two
modules share a name, and the tests import them under their own; one rule says what an object id is. Layers, lowest
first: the value types; the mailbox on disk; where a command works and the error edge; mail and sync over the store;
text; the delivery policy; the action layer; the adapters and wings; the command line, which routes to them; the
process's entry."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gitmail"
LAYERS = [
    ["gitmail", "gitmail.errors", "gitmail.values"],
    ["gitmail.store"],
    ["gitmail.workspace", "gitmail.project", "gitmail.edge", "gitmail.codex"],
    [
        "gitmail.mailbox",
        "gitmail.sync.remotes",
        "gitmail.sync.quick",
        "gitmail.sync.background",
        "gitmail.sync.limits",
        "gitmail.arrivals",
    ],
    ["gitmail.sync.remotestate", "gitmail.sync.reconcile", "gitmail.sync.engine", "gitmail.render"],
    ["gitmail.delivery", "gitmail.waking", "gitmail.guarding", "gitmail.notify"],
    ["gitmail.actions"],
    [
        "gitmail.hooks",
        "gitmail.commit_guard",
        "gitmail.starts",
        "gitmail.mcp",
        "gitmail.web",
        "gitmail.install",
        "gitmail.doctor",
    ],
    ["gitmail.cli"],
    ["gitmail.__main__"],
]


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every gitmail module `name` imports, wherever in the file (a function body, `if TYPE_CHECKING:`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known}
    return {module for module in found if module in known and module != name}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(name: str, path: Path, known: set[str]) -> set[str]:
    """Every private name (`_x`, not a dunder) of another gitmail module that `name` imports (`from gitmail.x import
    _y`) or reaches as an attribute of a module it imported (`x._y`, `gitmail.x._y`), wherever in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}  # a name in this file -> the gitmail module it stands for
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    bound[alias.asname or "gitmail"] = alias.name if alias.asname else "gitmail"
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base not in known:
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif _private(alias.name) and base != name:
                    found.add(f"{base}.{alias.name}")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        trail, value = [], node.value
        while isinstance(value, ast.Attribute):
            trail.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            owner = ".".join([bound[value.id], *reversed(trail)])
            if owner in known and owner != name:
                found.add(f"{owner}.{node.attr}")
    return found


def layer(name: str) -> int:
    matches = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if name == prefix or name.startswith(prefix + ".")
    ]
    assert matches, f"{name} belongs to no layer: add it to LAYERS"
    return max(matches)[1]


GRAPH = {name: imports(name, path, set(modules())) for name, path in modules().items()}


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_a_module_imports_nothing_above_its_layer(name: str) -> None:
    above = sorted(other for other in GRAPH[name] if layer(other) > layer(name))
    assert not above, f"{name} (layer {layer(name)}) imports {above}"


def test_there_is_no_import_cycle() -> None:
    state: dict[str, int] = {}  # 1: being walked, 2: done

    def walk(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = trail[trail.index(name) :] + [name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        state[name] = 1
        for other in sorted(GRAPH[name]):
            walk(other, [*trail, name])
        state[name] = 2

    for name in sorted(GRAPH):
        walk(name, [])


def test_the_walk_sees_imports_inside_functions_and_for_typing(tmp_path: Path) -> None:
    """The test above can fail: an import hidden in a function or behind TYPE_CHECKING counts."""
    hidden = tmp_path / "gitmail" / "x.py"
    hidden.parent.mkdir()
    hidden.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gitmail.actions import send\n"
        "def f():\n    from gitmail import delivery\n"
    )
    assert imports("gitmail.x", hidden, {"gitmail.actions", "gitmail.delivery", "gitmail.x"}) == {
        "gitmail.actions",
        "gitmail.delivery",
    }


def test_no_module_uses_another_modules_private_names() -> None:
    """What a module shares it makes public; its own `_names` are its own business."""
    known = set(modules())
    found = {name: sorted(uses) for name, path in modules().items() if (uses := private_uses(name, path, known))}
    assert found == {}, f"private names used outside their module: {found}"


def test_the_walk_sees_private_names_imported_or_reached_through_a_module(tmp_path: Path) -> None:
    """The test above can fail: a private name imported, even relatively or in a function, or reached through any
    spelling of a module counts; a module's own privates, dunders, and privates of what is not a module do not."""
    x = tmp_path / "gitmail" / "install" / "x.py"
    x.parent.mkdir(parents=True)
    x.write_text(
        "import gitmail.store.files\nimport gitmail.store.refs as refs\nfrom gitmail import delivery, __version__\n"
        "from gitmail.install import jsonedit\nfrom gitmail.install.jsonedit import Node\n"
        "def f():\n    from .settings import _read\n    from gitmail.install.x import _own\n"
        "    return (gitmail.store.files._temporary, refs._packed, delivery._table, jsonedit.__doc__,\n"
        "            Node._replace, _own, _read)\n"
    )
    known = {
        "gitmail", "gitmail.delivery", "gitmail.install", "gitmail.install.jsonedit", "gitmail.install.settings",
        "gitmail.install.x", "gitmail.store", "gitmail.store.files", "gitmail.store.refs",
    }  # fmt: skip
    assert private_uses("gitmail.install.x", x, known) == {
        "gitmail.install.settings._read",
        "gitmail.store.files._temporary",
        "gitmail.store.refs._packed",
        "gitmail.delivery._table",
    }


def _normal(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def test_every_outside_package_imported_is_declared() -> None:
    """What the package imports from outside the standard library comes from a distribution that pyproject.toml
    declares, for the base install or an extra: nothing works only because another package happened to pull it in."""
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    requirements = [
        *project["dependencies"],
        *(r for extra in project["optional-dependencies"].values() for r in extra),
    ]
    declared = {_normal(re.match(r"[A-Za-z0-9._-]+", r)[0]) for r in requirements}  # type: ignore[index]
    outside = set()
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                outside |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                outside.add(node.module.partition(".")[0])
    outside -= {"gitmail", *sys.stdlib_module_names}
    outside = {m for m in outside if not m.startswith("_")}  # the interpreter's private modules (_sha2 is 3.12's)
    providers = importlib.metadata.packages_distributions()
    assert {"pygit2", "typer", "watchfiles", "jinja2"} <= outside  # the walk sees them
    undeclared = {m: providers.get(m, []) for m in outside if not {_normal(d) for d in providers.get(m, [])} & declared}
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"


def test_no_two_modules_share_a_name() -> None:
    """A module's name says where it lives: two files of one name (hooks.py and install/hooks.py) send a newcomer
    to the wrong one."""
    names: dict[str, list[str]] = {}
    for name, path in modules().items():
        if path.name != "__init__.py":
            names.setdefault(path.stem, []).append(name)
    assert {stem: found for stem, found in names.items() if len(found) > 1} == {}


TESTS = PACKAGE.parent / "tests"


def aliases(path: Path) -> list[str]:
    """Every gitmail module or name `path` imports under another name (`from gitmail.sync import engine as sync`,
    `import gitmail.web.httpd as view`), as `line: what as name`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            pairs = [(alias.name, alias.asname) for alias in node.names if alias.name.split(".")[0] == "gitmail"]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "gitmail":
            pairs = [(f"{node.module}.{alias.name}", alias.asname) for alias in node.names]
        else:
            continue
        found += [
            f"{node.lineno}: {name} as {asname}"
            for name, asname in pairs
            if asname not in (None, name.rpartition(".")[2])
        ]
    return found


def test_tests_import_gitmail_modules_under_their_own_names() -> None:
    """A test that says `sync.pull` where the module is `engine` sends a reader to a file that does not exist."""
    found = {str(path.relative_to(TESTS)): hits for path in sorted(TESTS.rglob("*.py")) if (hits := aliases(path))}
    assert found == {}, f"gitmail imported under another name: {found}"


def test_the_alias_walk_sees_every_spelling(tmp_path: Path) -> None:
    """The test above can fail: a module or a name renamed on import counts, in a function too; the same name
    spelt again, and other packages' aliases, do not."""
    x = tmp_path / "test_x.py"
    x.write_text(
        "import gitmail.web.httpd as view\nimport gitmail.store\nfrom gitmail.sync import engine as sync, quick\n"
        "from gitmail.store import machines as machines\nimport numpy as np\nfrom . import helper as h\n"
        "def f():\n    from gitmail.store.stamps import directory as stamps_directory\n"
    )
    assert aliases(x) == [
        "1: gitmail.web.httpd as view",
        "3: gitmail.sync.engine as sync",
        "8: gitmail.store.stamps.directory as stamps_directory",
    ]


# Where a 40-digit hexadecimal pattern is not the object-id rule: a patch's mbox line, a search of git's error text.
NOT_THE_RULE = {"project.py": "From [0-9a-f]{40} Mon Sep", "store/catfile.py": r"\b[0-9a-f]{40}\b"}
OID_RULE = re.compile(r"\{40\}|== 40\b|\b40 ==")


def spelt_oid_rules(package: Path) -> list[str]:
    """Every line outside values/ids.py that writes its own rule for an object id."""
    found = []
    for path in sorted(package.rglob("*.py")):
        name = str(path.relative_to(package))
        if name == "values/ids.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if OID_RULE.search(line) and not (name in NOT_THE_RULE and NOT_THE_RULE[name] in line):
                found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_one_rule_says_what_an_object_id_is() -> None:
    """values/ids.py's `is_oid` and `ObjectId.of` are the rule; a reader with its own (a regular expression, a
    length) will one day disagree with it."""
    assert spelt_oid_rules(PACKAGE) == []


def test_the_object_id_walk_sees_a_rule_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "sync").mkdir()
    (tmp_path / "sync" / "x.py").write_text('ok = re.fullmatch(r"[0-9a-f]{40}", o)\nfine = len(oid) == 40\n')
    (tmp_path / "project.py").write_text('M = re.compile(rb"^From [0-9a-f]{40} Mon Sep 17")\n')
    assert spelt_oid_rules(tmp_path) == [
        'sync/x.py:1: ok = re.fullmatch(r"[0-9a-f]{40}", o)',
        "sync/x.py:2: fine = len(oid) == 40",
    ]
