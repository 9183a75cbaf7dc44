"""What the developer docs promise about the tree: docs/development.md's table gives every module of gitmail/ a row
naming its test files, and every module and test file the table names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gitmail"
TESTS = ROOT / "tests"
DEVELOPMENT = ROOT / "docs" / "development.md"
HEADING = "## Where each module is tested"
ROW = re.compile(r"^\| `(?P<module>[^`]+)` \| (?P<tests>.*) \|$")


def rows(text: str) -> dict[str, list[str]]:
    """The table under HEADING: module (its path under gitmail/) -> the test files it names (paths under tests/)."""
    assert HEADING in text, f"docs/development.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    table: dict[str, list[str]] = {}
    for line in section.splitlines():
        if match := ROW.match(line):
            assert match["module"] not in table, f"docs/development.md names {match['module']} in two rows"
            table[match["module"]] = re.findall(r"`([^`]+)`", match["tests"])
    return table


def needs_a_row(path: Path) -> bool:
    """Every module, but a package's `__init__.py` that holds nothing but its docstring."""
    if path.name != "__init__.py":
        return True
    body = ast.parse(path.read_text(), str(path)).body
    return not all(
        isinstance(node, ast.Expr) or (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        for node in body
    )


def lacking(table: dict[str, list[str]], package: Path) -> list[str]:
    return [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if needs_a_row(path) and str(path.relative_to(package)) not in table
    ]


def stale(table: dict[str, list[str]], package: Path, tests: Path) -> list[str]:
    gone = [f"the module gitmail/{module}" for module in table if not (package / module).is_file()]
    return gone + [
        f"the test file tests/{test} (row {module})"
        for module, named in table.items()
        for test in named
        if not (tests / test).is_file()
    ]


TABLE = rows(DEVELOPMENT.read_text())


def test_every_module_has_a_row_naming_its_tests() -> None:
    missing = lacking(TABLE, PACKAGE)
    assert not missing, "".join(
        f"\ngitmail/{module} has no row in docs/development.md ({HEADING[3:]}): add `| `{module}` | `test_….py` |`"
        for module in missing
    )
    assert all(TABLE.values()), [module for module, named in TABLE.items() if not named]


def test_the_table_names_only_modules_and_test_files_that_exist() -> None:
    gone = stale(TABLE, PACKAGE, TESTS)
    assert not gone, "docs/development.md's table of modules and their tests names what is not there: " + "; ".join(
        gone
    )


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A module without a row, a row for a module that is gone and a test file that is not there are each found;
    an `__init__.py` of only a docstring needs no row, one with code does."""
    package, tests = tmp_path / "gitmail", tmp_path / "tests"
    (package / "render").mkdir(parents=True)
    tests.mkdir()
    (package / "render" / "__init__.py").write_text('"""Text."""\nfrom __future__ import annotations\n')
    (package / "render" / "text.py").write_text("")
    (package / "store").mkdir()
    (package / "store" / "__init__.py").write_text("X = 1\n")
    (tests / "test_render.py").write_text("")
    table = rows(
        f"# Dev\n\n{HEADING}\n\n| module | tests |\n|---|---|\n| `render.py` | `test_render.py`, `test_gone.py` |\n"
    )
    assert lacking(table, package) == ["render/text.py", "store/__init__.py"]
    assert stale(table, package, tests) == [
        "the module gitmail/render.py",
        "the test file tests/test_gone.py (row render.py)",
    ]
    with pytest.raises(AssertionError, match="in two rows"):
        rows(f"{HEADING}\n| `a.py` | `t.py` |\n| `a.py` | `u.py` |\n")
