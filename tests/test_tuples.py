"""The value classes built without `typing` behave as `typing.NamedTuple`'s do, for everything gitmail asks of them."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest

from gitmail.values import tuples


def pair() -> tuple[type, type]:
    """One class written twice, once on each base."""

    def build(base: typing.Any) -> type:
        class Point(base):  # type: ignore[misc]
            """A point."""

            x: int
            y: int = 0
            label: str = ""

            def moved(self, by: int) -> Point:
                return self._replace(x=self.x + by)  # type: ignore[no-any-return]

            @property
            def far(self) -> bool:
                return bool(self.x > 9)

        return Point

    return build(typing.NamedTuple), build(tuples.NamedTuple)


def test_a_value_class_behaves_as_a_named_tuple() -> None:
    real, lean = pair()
    makers: list[typing.Callable[[typing.Any], typing.Any]] = [
        lambda c: c(1),
        lambda c: c(1, 2),
        lambda c: c(1, label="a"),
        lambda c: c(x=3, y=4),
        lambda c: c(10, 2, "b").moved(5),
        lambda c: c._make([7, 8, "c"]),
    ]
    for made in makers:
        one, other = made(real), made(lean)
        assert tuple(one) == tuple(other) and repr(one) == repr(other)
        assert one._asdict() == other._asdict()
        assert one.far == other.far and other.x == one.x and other.label == one.label
    assert real._fields == lean._fields and real._field_defaults == lean._field_defaults  # type: ignore[attr-defined]
    assert lean.__doc__ == "A point." and lean.__name__ == "Point" and lean.__match_args__ == ("x", "y", "label")  # type: ignore[attr-defined]
    point = lean(1, 2, "a")
    assert point == (1, 2, "a") and hash(point) == hash((1, 2, "a")) and isinstance(point, tuple)
    with pytest.raises(AttributeError):
        point.z = 1  # type: ignore[attr-defined]
    match point:
        case lean(x, y):  # type: ignore[misc]
            assert (x, y) == (1, 2)


@pytest.mark.parametrize(
    "call",
    [lambda c: c(), lambda c: c(1, 2, "a", 4), lambda c: c(1, z=2), lambda c: c(1, x=2), lambda c: c(1)._replace(z=1)],
)
def test_wrong_fields_are_refused_as_named_tuples_refuse_them(call: typing.Callable[[type], object]) -> None:
    real, lean = pair()
    with pytest.raises((TypeError, ValueError)) as refused:
        call(real)
    with pytest.raises(refused.type):
        call(lean)


def test_a_field_without_a_default_after_one_with_is_refused() -> None:
    with pytest.raises(TypeError):

        class Bad(tuples.NamedTuple):
            a: int = 0
            b: int


def test_building_value_classes_imports_no_typing() -> None:
    probe = (
        "import sys\nfrom gitmail.values import tuples\n"
        "class P(tuples.NamedTuple):\n    a: int\n"
        "print(sorted(m for m in ('typing', 'collections') if m in sys.modules), P(1))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, env=_plain_path())
    assert out.stdout.strip() == "[] P(a=1)", out.stderr


def _plain_path() -> dict[str, str]:
    import os
    from pathlib import Path

    import gitmail

    return {**os.environ, "PYTHONPATH": str(Path(gitmail.__file__).resolve().parent.parent)}
