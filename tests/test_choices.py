"""The closed sets of named values built without `enum` behave as `enum.Enum`'s do, for everything gitmail asks of
them."""

from __future__ import annotations

import copy
import enum
import typing

import pytest

from gitmail.values import choices


def pair() -> tuple[typing.Any, typing.Any]:
    """One class written twice, once on each base."""

    def build(base: typing.Any) -> typing.Any:
        class Moment(base):  # type: ignore[misc]
            START = "session-start"  # a comment, as the policy writes them
            TOOL = "tool"
            STOP = "stop"

            def spoken(self) -> str:
                return f"at {self.value}"

        return Moment

    return build(enum.Enum), build(choices.Enum)


def test_named_values_behave_as_enum_members() -> None:
    real, lean = pair()
    assert [(m.name, m.value) for m in real] == [(m.name, m.value) for m in lean]
    assert len(real) == len(lean) == 3
    for value in ("session-start", "tool", "stop"):
        one, other = real(value), lean(value)
        assert (one.name, one.value, repr(one), str(one)) == (other.name, other.value, repr(other), str(other))
        assert other is getattr(lean, other.name) and other.spoken() == one.spoken()
        assert copy.copy(other) is other and copy.deepcopy(other) is other
    assert lean.START != lean.TOOL and lean.START != "session-start" and {lean.START: 1}[lean("session-start")] == 1
    assert isinstance(lean.START, lean) and lean.START in (lean.TOOL, lean.START)


@pytest.mark.parametrize("value", ["nothing", None, ["tool"]])
def test_an_unknown_value_is_refused_as_enum_refuses_it(value: object) -> None:
    real, lean = pair()
    with pytest.raises(ValueError):
        real(value)
    with pytest.raises(ValueError):
        lean(value)


def test_a_member_cannot_be_replaced() -> None:
    _, lean = pair()
    with pytest.raises(AttributeError):
        lean.START = "other"
