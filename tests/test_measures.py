"""The package's sizes: no module over 600 lines and no function over 80, so that each file keeps one job a reader
can hold in mind. A function that must stay longer is named below with its reason; a module never is."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gitmail"
MODULE_LINES = 600
FUNCTION_LINES = 80
LONGER: dict[str, str] = {}  # "module:function" -> why it stays longer (none today: split instead)


def module_lengths(package: Path) -> dict[str, int]:
    """Every module of the package, with its length in lines."""
    return {str(path.relative_to(package.parent)): len(path.read_text().splitlines()) for path in package.rglob("*.py")}


def function_lengths(package: Path) -> dict[str, int]:
    """Every function and method of the package ("gitmail/x.py:Class.method"), with its length in lines from its
    first decorator to its last line."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        where = str(path.relative_to(package.parent))

        def walk(node: ast.AST, trail: tuple[str, ...], where: str = where) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    name = (*trail, child.name)
                    if not isinstance(child, ast.ClassDef):
                        first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                        found[f"{where}:{'.'.join(name)}"] = (child.end_lineno or child.lineno) - first + 1
                    walk(child, name)
                else:
                    walk(child, trail)

        walk(ast.parse(path.read_text(), where), ())
    return found


def test_no_module_is_over_600_lines() -> None:
    longer = {name: lines for name, lines in module_lengths(PACKAGE).items() if lines > MODULE_LINES}
    assert longer == {}, f"split these modules by job: {longer}"


def test_no_function_is_over_80_lines() -> None:
    longer = {
        name: lines
        for name, lines in function_lengths(PACKAGE).items()
        if lines > FUNCTION_LINES and name not in LONGER
    }
    assert longer == {}, f"split these functions (or name them in LONGER with a reason): {longer}"


def test_every_function_kept_longer_still_is() -> None:
    """An entry left behind after its function was split or removed would let the next one grow unnoticed."""
    lengths = function_lengths(PACKAGE)
    stale = sorted(name for name in LONGER if lengths.get(name, 0) <= FUNCTION_LINES)
    assert stale == [], f"no longer needed in LONGER: {stale}"


def test_the_measures_see_long_modules_and_nested_long_functions(tmp_path: Path) -> None:
    """The tests above can fail: a long module counts, and so does a long method or a function nested in one."""
    package = tmp_path / "gitmail"
    (package / "sub").mkdir(parents=True)
    inner = "".join(f"            x = {n}\n" for n in range(FUNCTION_LINES))
    (package / "sub" / "long.py").write_text(
        "class C:\n    @staticmethod\n    def m():\n        def inner():\n"
        + inner
        + "        return inner\n"
        + "\n" * MODULE_LINES
    )
    (package / "short.py").write_text("def f():\n    return 1\n")
    assert module_lengths(package)["gitmail/short.py"] == 2
    assert module_lengths(package)["gitmail/sub/long.py"] > MODULE_LINES
    lengths = function_lengths(package)
    assert lengths["gitmail/short.py:f"] == 2
    assert lengths["gitmail/sub/long.py:C.m"] > FUNCTION_LINES
    assert lengths["gitmail/sub/long.py:C.m.inner"] == FUNCTION_LINES + 1
