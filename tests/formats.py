"""Mailboxes as an older gitmail format left them, made from a current one: what migration starts from."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from gitmail.errors import UsageError
from gitmail.store import stamps
from gitmail.store.hookfiles import BROADCAST_STAMP
from gitmail.store.repository import Store
from gitmail.store.writer import writing
from gitmail.values.ids import new_id
from gitmail.values.layout import ROOT, Change
from gitmail.values.message import Message
from gitmail.values.names import RepoName, first_format_ref


def git(box: Store, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(box.path), *args], input=stdin, capture_output=True, text=True, check=True
    ).stdout


def refs(box: Store, prefix: str = ROOT) -> dict[str, str]:
    """Every ref under `prefix` with the commit it names, as git lists them."""
    out = git(box, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ") for line in out.splitlines())


def as_format_1(
    box: Store,
    *,
    spelled: Mapping[str, str] | None = None,
    order: Sequence[str] = (),
    claims: Mapping[str, str] | None = None,
) -> None:
    """Rewrite a current mailbox as format 1 left it: every repo's refs spelled with upper case kept and the name
    as it was given (`spelled` maps a message id to how its recipient's name was given, e.g. in NFD; by default
    the name itself), stamp files named the same way, `claims` (name as given -> path) as claims.json, and
    gitmail.version 1. Names are written one at a time, those in `order` first: on a file system that ignores case,
    the first of two spellings names the directory both then share."""
    spelled = spelled or {}
    moves: dict[str, list[tuple[str, str, str]]] = {}
    for ref, oid in refs(box).items():
        component, rest = ref[len(ROOT) :].split("/", 1)
        try:
            name = RepoName.from_ref(component)
        except UsageError:
            continue  # broadcasts, and refs written as format 1 already
        given = spelled.get(rest.rsplit("/", 1)[-1], name)
        moves.setdefault(given, []).append((ref, oid, f"{ROOT}{first_format_ref(given)}/{rest}"))
    git(box, "config", "core.logAllRefUpdates", "always")  # formats 1 and 2 kept a reflog for every ref
    everything = [move for group in moves.values() for move in group]
    git(box, "update-ref", "--stdin", stdin="".join(f"delete {ref} {oid}\n" for ref, oid, _ in everything))
    for given in [*order, *sorted(set(moves) - set(order))]:
        creates = "".join(f"create {old} {oid}\n" for _, oid, old in moves.get(given, []))
        git(box, "update-ref", "-m", "gitmail: written by format 1", "--stdin", stdin=creates)
    git(box, "config", "gitmail.version", "1")
    shutil.rmtree(box.own_dir / "history", ignore_errors=True)  # format 1 had no history index
    folder = Path(stamps.directory(box.path))
    for file in os.listdir(folder) if folder.is_dir() else []:
        if file != BROADCAST_STAMP:
            os.replace(folder / file, folder / first_format_ref(RepoName.from_ref(file)))
    if claims:
        (box.own_dir / "claims.json").write_text(json.dumps(dict(claims)))


def send_as_format_1(box: Store, *, sender: str, to: str, subject: str, when: datetime) -> tuple[str, str]:
    """A message as format 1 wrote it, names exactly as given (not normalised): in its document, trailers, author
    address and ref. Returns its id and ref. Write it into a current mailbox, then make that one format 1."""
    given_sender = str.__new__(RepoName, sender)  # RepoName() would normalise it, as format 2 does
    message = Message(id=new_id(), sender=given_sender, to=to, subject=subject, body="", date=when)
    ref = f"{ROOT}{first_format_ref(to)}/inbox/{message.id}"
    with writing(box, actor=RepoName("test")) as writer:
        writer.apply([Change(ref, writer.commit(message), None)], "gitmail: written by format 1")
    return message.id, ref


@contextmanager
def writing_as_format_2(box: Store) -> Iterator[None]:
    """Write into the mailbox as format 2 did: a reflog for every ref (`core.logAllRefUpdates = always`) and no
    record of moves; gitmail.version 2 once done (so the next process that opens it migrates it)."""
    from gitmail.store import moves

    box.create()
    git(box, "config", "core.logAllRefUpdates", "always")
    git(box, "config", "gitmail.autoPack", "false")  # a format-2 mailbox was packed only under the lock, rarely
    original = moves.record
    moves.record = lambda *args, **kwargs: []
    try:
        yield
    finally:
        moves.record = original
    git(box, "config", "gitmail.version", "2")
    git(box, "config", "--unset", "gitmail.autoPack")


@contextmanager
def writing_as_format_3(box: Store) -> Iterator[None]:
    """Write into the mailbox as format 3 did: a reflog for each notes ref (`core.logAllRefUpdates = true`), and the
    moves of every other ref in the record; gitmail.version 3 once done."""
    from gitmail.store import moves

    box.create()
    git(box, "config", "core.logAllRefUpdates", "true")
    git(box, "config", "gitmail.autoPack", "false")
    original = moves.recorded
    moves.recorded = lambda changes: [c for c in original(changes) if not c.ref.startswith("refs/notes/")]
    try:
        yield
    finally:
        moves.recorded = original
    git(box, "config", "gitmail.version", "3")
    git(box, "config", "--unset", "gitmail.autoPack")
