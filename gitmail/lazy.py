"""A package's public names loaded when first used: a package that gathers many modules' names for its readers (the
action layer, the mail operations) costs an import of each module it names only when one of its names is asked
for, so a hook that needs one of them does not load them all. The names are written out for type checkers beside
(under TYPE_CHECKING), and here as where each lives."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def exports(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """The `__getattr__` of a package whose name NAME lives in the module `where[NAME]` ("module" or
    "module:name" when it is called otherwise there)."""
    namespace = __import__(package, fromlist=["__name__"]).__dict__

    def attribute(name: str) -> object:
        found = where.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, inner = found.partition(":")
        value = getattr(__import__(module, fromlist=[inner or name]), inner or name)
        namespace[name] = value  # asked once
        return value

    return attribute


class module:  # noqa: N801 (it stands where a module would)
    """A module loaded at the first use of one of its names: `codex = module("gitmail.codex")` in a module whose
    commonest path never calls it (the module itself is named under TYPE_CHECKING for type checkers)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> object:
        return getattr(__import__(self._name, fromlist=["__name__"]), attribute)
