"""Closed sets of named values written as `enum.Enum` classes are, built without `enum`'s machinery: the delivery
policy's moments and channels and the places of a message are made at every session start and every `inbox`, and
an Enum class costs those paths a fraction of a millisecond each to build.

A module writes
    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from enum import Enum
    else:
        from gitmail.values.choices import Enum
and type checkers see the real thing. At run time each member is one instance of its class, with `name` and
`value`; `Class(value)` finds a member (ValueError when none has it), iterating the class gives its members in
order, members compare by identity and hash as objects do, and `repr` reads as an Enum member's.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


class _Members(type):
    """Turns each plain class attribute of a class naming `Enum` as its base into a member."""

    _by_value_: dict[Any, Any]

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        members = {
            key: value
            for key, value in namespace.items()
            if not key.startswith("_") and not callable(value) and not isinstance(value, classmethod | property)
        }
        made = super().__new__(mcs, name, bases, {k: v for k, v in namespace.items() if k not in members})
        by_value: dict[Any, Any] = {}
        for key, value in members.items():
            member: Any = object.__new__(made)  # type: ignore[arg-type]
            member._name_, member._value_ = key, value
            type.__setattr__(made, key, member)
            by_value.setdefault(value, member)
        made._by_value_ = by_value
        return made

    def __call__(cls, value: Any) -> Any:
        try:
            return cls._by_value_[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a valid {cls.__name__}") from None

    def __iter__(cls) -> Iterator[Any]:
        return iter(list(cls._by_value_.values()))

    def __len__(cls) -> int:
        return len(cls._by_value_)

    def __setattr__(cls, name: str, value: Any) -> None:
        if isinstance(getattr(cls, name, None), cls):
            raise AttributeError(f"cannot reassign member {name!r}")
        super().__setattr__(name, value)


class Enum(metaclass=_Members):
    """The base a class of named values names (see the module's docstring)."""

    __slots__ = ("_name_", "_value_")
    _name_: str
    _value_: Any

    @property
    def name(self) -> str:
        return self._name_

    @property
    def value(self) -> Any:
        return self._value_

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self._name_}: {self._value_!r}>"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self._name_}"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self._value_,)
