"""Fitting many pending messages under a budget (render/frames.py `select`): a card that cannot fit by its least
size (render/cards.py `least_size`) is not drawn to be measured, and what is chosen is what measuring every card
chooses."""

from __future__ import annotations

import random
from datetime import datetime

import pytest

from gitmail.render import cards, frames
from gitmail.render.words import size
from gitmail.values.ids import BROADCAST, ObjectId
from gitmail.values.layout import State
from gitmail.values.mail import Entry, Pending
from gitmail.values.message import Message
from gitmail.values.names import RepoName
from tests.conftest import at


def entry(
    number: int, subject: str, body: str, *, to: str = "web", date: datetime | None = None, urgency: str = "normal"
) -> Entry:
    message = Message(f"m{number:04d}", RepoName("api"), to, subject, body, date or at(number), urgency=urgency)
    state = State.BROADCAST if to == BROADCAST else State.PENDING
    return Entry(message, state, ObjectId(f"{number:040x}"), None if to == BROADCAST else RepoName(to))


SMALL = [
    entry(1, "s", ""),
    entry(2, "s", "   \n\t\n"),
    entry(3, "s", "x"),
    entry(4, "s", "", to=BROADCAST),
    entry(5, "é", "\u200b", date=datetime(2025, 1, 1, 0, 0)),  # a date without a zone: its shortest text
    entry(6, "s", "a" * 5000, urgency="now"),
]


@pytest.mark.parametrize("label", ["PEER", "UNVERIFIED"])
@pytest.mark.parametrize("command", ["gitmail", "/a/long/path/to/gitmail"])
def test_a_cards_least_size_is_never_more_than_its_whole_or_summarised_size(label: str, command: str) -> None:
    voice = cards.Voice(command=command)
    for item in SMALL:
        least = cards.least_size(item, label, voice=voice)
        assert least <= size(cards.drawn(item, label, voice=voice))
        assert least <= size(cards.drawn(item, label, summary=True, voice=voice))


def mixed(count: int, seed: int) -> Pending:
    rng = random.Random(seed)
    made = [
        entry(
            n,
            "subject " * rng.randint(0, 8),
            "line of body\n" * rng.choice([0, 1, 3, 10, 40, 1200]),
            to=BROADCAST if rng.random() < 0.2 else "web",
            urgency=rng.choice(["normal", "normal", "now", "low"]),
        )
        for n in range(count)
    ]
    return Pending(
        RepoName("web"), [e for e in made if e.state is State.PENDING], [e for e in made if e.state is State.BROADCAST]
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("budget", [3000, 5000, frames.BUDGET])
def test_what_is_chosen_is_what_measuring_every_card_chooses(
    seed: int, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    mail = mixed(120, seed)
    chosen = frames.select(mail, claims={}, budget=budget)
    with monkeypatch.context() as patch:
        patch.setattr(frames, "least_size", lambda *args, **kwargs: 0)  # every card measured
        measured = frames.select(mail, claims={}, budget=budget)
    assert chosen == measured
    assert 0 < len(chosen.directed) + len(chosen.broadcasts) < 120


@pytest.mark.parametrize(
    "text",
    ["", "plain", 'a "quoted" \\ back', "tab\tnew\nline\x00\x1b[31m", "é 日本 🎉", "\u202e\u200b\u2028", "\ud800"],
)
def test_a_quoted_text_is_json_dumps_to_the_character(text: str) -> None:
    import json

    from gitmail.render.words import _escapes, quote

    expected = json.dumps(text, ensure_ascii=False)
    if not (expected.isascii() and expected.isprintable()):
        expected = expected.translate(_escapes("json"))
    assert quote(text) == expected
