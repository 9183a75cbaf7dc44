from __future__ import annotations

from typing import Any

import frontmatter
import pytest

from gitmail.errors import UsageError
from gitmail.values.ids import BROADCAST, new_id
from gitmail.values.message import BadDocument, Message, clean_body, clean_subject, parse, reply_subject
from gitmail.values.names import RepoName
from tests.conftest import WHEN


def message(**changes: Any) -> Message:
    base = Message(
        id="7kq2m9x4ab",
        sender=RepoName("api"),
        to="web",
        subject="Schema v2 is live",
        body="The orders table has a status column.\n",
        date=WHEN,
    )
    return base._replace(**changes)


def test_document_is_frontmatter_markdown_in_the_strict_form() -> None:
    assert message(reply_to="5tgh0a1b2c").document().decode() == (
        "---\n"
        'id: "7kq2m9x4ab"\n'
        'from: "api"\n'
        'to: "web"\n'
        'subject: "Schema v2 is live"\n'
        'date: "2026-11-29T09:30:00+00:00"\n'
        'reply-to: "5tgh0a1b2c"\n'
        "---\n"
        "The orders table has a status column.\n"
    )


TRICKY = [
    message(),
    message(subject='He said "hi" \\ ok', body="---\nid: forged\n---\nnot frontmatter"),
    message(sender=RepoName("My App"), to="données", subject="ünïcødé ✓ 日本"),
    message(to=BROADCAST, body=""),
    message(body="  indented first line\n\n\ntrailing blank lines\n\n"),
    message(subject="# not a heading: key: value", body='{"json": true}'),
]


@pytest.mark.parametrize("original", TRICKY)
def test_documents_round_trip_exactly(original: Message) -> None:
    assert parse(original.document()) == original


@pytest.mark.parametrize("original", TRICKY)
def test_python_frontmatter_reads_the_same_fields(original: Message) -> None:
    post = frontmatter.loads(original.document().decode())
    assert post.metadata["id"] == original.id
    assert post.metadata["from"] == original.sender
    assert post.metadata["to"] == original.to
    assert post.metadata["subject"] == original.subject
    assert post.metadata["date"] == original.date.isoformat()
    assert post.content == original.body.strip()


def test_a_document_gitmail_did_not_write_is_read_with_python_frontmatter() -> None:
    text = (
        "---\nid: 7kq2m9x4ab\nfrom: api\nto: web\nsubject: Written by hand\n"
        "date: 2026-11-29T09:30:00+00:00\n---\nHello\n"
    )
    parsed = parse(text.encode())
    assert (parsed.id, parsed.sender, parsed.subject, parsed.body) == ("7kq2m9x4ab", "api", "Written by hand", "Hello")


@pytest.mark.parametrize(
    "text",
    [
        b"\xff\xfe not utf-8",
        b"no frontmatter at all",
        b'---\nid: "7kq2m9x4ab"\nfrom: "api"\n---\nmissing fields',
        b'---\nid: "bad id"\nfrom: "api"\nto: "web"\nsubject: "s"\ndate: "2026-11-29T09:30:00+00:00"\n---\n',
        b'---\nid: "7kq2m9x4ab"\nfrom: "a/b"\nto: "web"\nsubject: "s"\ndate: "2026-11-29T09:30:00+00:00"\n---\n',
        b'---\nid: "7kq2m9x4ab"\nfrom: "api"\nto: "web"\nsubject: "s"\ndate: "2026-11-29T09:30:00"\n---\n',
        b"---\n: [unbalanced\n---\n",
    ],
)
def test_unreadable_documents_raise_bad_document(text: bytes) -> None:
    with pytest.raises(BadDocument):
        parse(text)


def test_commit_message_reads_like_mail_with_trailers() -> None:
    assert message(reply_to="5tgh0a1b2c").commit_message() == (
        "Schema v2 is live\n\n"
        "The orders table has a status column.\n\n"
        "Message-Id: 7kq2m9x4ab\nFrom: api\nTo: web\nReply-To: 5tgh0a1b2c\n"
    )
    assert message(body="").commit_message() == "Schema v2 is live\n\nMessage-Id: 7kq2m9x4ab\nFrom: api\nTo: web\n"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("plain", "plain"),
        ("two\nlines", "two lines"),
        ("cr\r\nlf", "cr lf"),
        ("tab\there", "tab here"),
        ("\x1b[31mred\x1b[0m", "[31mred [0m"),
        ("line\u2028separator", "line separator"),
        ("  padded  ", "padded"),
        ("bidi\u202eoverride", "bidi override"),
    ],
)
def test_subjects_collapse_to_one_printable_line(raw: str, clean: str) -> None:
    assert clean_subject(raw) == clean


@pytest.mark.parametrize("raw", ["", "   ", "\n\n", "\x00\x1b"])
def test_empty_subjects_are_refused(raw: str) -> None:
    with pytest.raises(UsageError, match="subject is empty"):
        clean_subject(raw)


def test_overlong_subject_is_refused() -> None:
    with pytest.raises(UsageError, match="limit is 200"):
        clean_subject("x" * 201)


def test_bodies_are_kept_exactly_within_the_cap() -> None:
    body = "a\r\nb\n\x1b[31m ✓\n" + "x" * 1000
    assert clean_body(body.encode()) == body
    assert len(clean_body(b"x" * 65536)) == 65536


@pytest.mark.parametrize(
    ("raw", "error"),
    [(b"x" * 65537, "65,537 bytes; the limit is 65,536"), (b"caf\xe9", "not valid UTF-8"), (b"a\x00b", "NUL")],
)
def test_bad_bodies_are_refused(raw: bytes, error: str) -> None:
    with pytest.raises(UsageError, match=error):
        clean_body(raw)


def test_ids_are_short_typeable_and_distinct() -> None:
    ids = {new_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 10 and not set(i) & set("ilou") for i in ids)


def test_reply_subjects_do_not_stack() -> None:
    assert reply_subject("Schema") == "Re: Schema"
    assert reply_subject("Re: Schema") == "Re: Schema"
    assert reply_subject("RE: Schema") == "RE: Schema"
