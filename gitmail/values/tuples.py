"""Value classes written as `typing.NamedTuple` classes are, built without importing `typing`: the paths that run at
every session start and every `inbox` define a few dozen of them, and `typing` with `collections.namedtuple` costs
those paths milliseconds at import.

A module writes
    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import NamedTuple
    else:
        from gitmail.values.tuples import NamedTuple
and type checkers see the real thing. At run time a class is a tuple of its annotated fields in order, with
defaults, keyword arguments, `_replace`, `_asdict`, `_fields`, `_field_defaults`, a `repr` like a named tuple's,
and the class's own methods, properties and docstring.
"""

from __future__ import annotations

from _collections import _tuplegetter  # type: ignore[import-not-found]  # the accessor namedtuple uses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_MISSING = object()


class _Builder(type):
    """Turns a class statement naming `NamedTuple` as its base into a plain tuple subclass."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        if namespace.get("_building_base"):
            return super().__new__(mcs, name, bases, namespace)
        if "__annotations__" not in namespace and "__annotate__" in namespace:
            raise TypeError(f"{name}: write `from __future__ import annotations` in its module")
        fields = tuple(namespace.get("__annotations__", {}))
        defaults = {field: namespace.pop(field) for field in fields if field in namespace}
        first_default = next((i for i, field in enumerate(fields) if field in defaults), len(fields))
        if any(field not in defaults for field in fields[first_default:]):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        body = {
            **namespace,
            "__slots__": (),
            "_fields": fields,
            "_field_defaults": defaults,
            "__match_args__": fields,
            "__new__": _new,
            "__repr__": _repr,
            "__getnewargs__": _getnewargs,
            "_replace": _replace,
            "_asdict": _asdict,
            "_make": classmethod(_make),
        }
        body.pop("__annotations__", None)
        for index, field in enumerate(fields):
            body[field] = _tuplegetter(index, f"Alias for field number {index}")
        made = type.__new__(type, name, (tuple,), body)
        made.__annotations__ = namespace.get("__annotations__", {})
        return made


class NamedTuple(metaclass=_Builder):
    """The base a value class names (see the module's docstring)."""

    _building_base = True


def _new(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """The first value made of a class writes its own `__new__` (as collections.namedtuple does, but only for the
    classes a process uses), then makes the value through it."""
    fields = cls._fields
    params, values = "".join(f", {field}" for field in fields), "".join(f"{field}, " for field in fields)
    made = eval(f"lambda _cls{params}: _tuple_new(_cls, ({values}))", {"_tuple_new": tuple.__new__})
    made.__name__ = made.__qualname__ = "__new__"
    made.__defaults__ = tuple(cls._field_defaults[field] for field in fields if field in cls._field_defaults) or None
    cls.__new__ = staticmethod(made)
    return made(cls, *args, **kwargs)


def _make(cls: Any, iterable: Any) -> Any:
    made = tuple.__new__(cls, iterable)
    if len(made) != len(cls._fields):
        raise TypeError(f"{cls.__name__} takes {len(cls._fields)} fields, {len(made)} given")
    return made


def _repr(self: Any) -> str:
    return f"{type(self).__name__}({', '.join(f'{f}={v!r}' for f, v in zip(self._fields, self, strict=True))})"


def _replace(self: Any, **changes: Any) -> Any:
    values = [changes.pop(field, value) for field, value in zip(self._fields, self, strict=True)]
    if changes:
        raise ValueError(f"{type(self).__name__} has no field {next(iter(changes))!r}")
    return tuple.__new__(type(self), values)


def _asdict(self: Any) -> dict[str, Any]:
    return dict(zip(self._fields, self, strict=True))


def _getnewargs(self: Any) -> tuple[Any, ...]:
    return tuple(self)
