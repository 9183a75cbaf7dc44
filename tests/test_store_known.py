"""Whether a repository has used the mailbox: the first message ref found answers, loose or packed, and a ref that
names no message is no use of it."""

from __future__ import annotations

import subprocess

from gitmail import mailbox
from gitmail.store import refs
from gitmail.store.repository import Store
from gitmail.values.layout import archive_prefix, inbox_prefix
from gitmail.values.names import RepoName


def git(box: Store, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=box.path, check=True, capture_output=True, text=True).stdout


def test_a_repository_with_mail_is_known_from_loose_or_packed_refs(box: Store) -> None:
    web = RepoName("web")
    assert not mailbox.known(box, web)
    mailbox.send(box, sender="api", to="web", subject="one")
    assert mailbox.known(box, web)
    git(box, "pack-refs", "--all")
    assert not [p for p in (box.path / inbox_prefix(web)).glob("**/*") if p.is_file()]  # packed, none loose
    assert mailbox.known(box, web)
    assert not mailbox.known(box, RepoName("api"))  # it sent, but nothing was ever addressed to it


def test_a_ref_that_names_no_message_is_not_a_use(box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="one")
    commit = next(iter(box.refs_under(inbox_prefix(RepoName("web"))).values()))
    git(box, "update-ref", archive_prefix(RepoName("ops")) + "not-an-id", commit)
    assert box.refs_under(archive_prefix(RepoName("ops")))
    assert not mailbox.known(box, RepoName("ops"))


def test_the_first_ref_found_stops_the_listing(box: Store) -> None:
    for number in range(3):
        mailbox.send(box, sender="api", to="web", subject=f"m{number}")
    seen: list[str] = []

    def accept(ref: str, oid: str) -> bool:
        seen.append(ref)
        return True

    found = refs.first(box.path, inbox_prefix(RepoName("web")), accept)
    assert found is not None and len(seen) == 1
    assert refs.first(box.path, inbox_prefix(RepoName("nobody")), accept) is None


def test_a_small_block_of_packed_refs_is_read_line_by_line_as_the_pattern_reads_it() -> None:
    """The first block of a packed-refs lookup is split into lines (no pattern compiled for the few refs a send
    looks up); what it finds is what the pattern finds, for refs and for every kind of line that holds none."""
    import random

    oid = "0123456789abcdef0123456789abcdef01234567"
    kinds = [f"{oid} refs/gitmail/web/inbox/a", f"^{oid}", "# pack-refs with: peeled fully-peeled sorted",
             f"{oid} refs/x y", f"{oid}  refs/x", f"{oid} refs/", f"{oid} refsx/a", f"{oid[:7]} refs/short",
             f"{oid.upper()} refs/upper", f"{oid} refs/tail\r", "", " ", f"{oid}", f"{oid} refs/é/ü", "garbage"]  # fmt: skip
    rng = random.Random(3)
    for _ in range(300):
        text = "\n".join(rng.choice(kinds) for _ in range(rng.randrange(12))).encode() + rng.choice([b"", b"\n"])
        assert list(refs._ref_lines(text, small=True)) == list(refs._ref_lines(text, small=False)), text


def test_many_refs_resolved_at_once_read_packed_refs_whole_and_answer_as_one_at_a_time(box: Store) -> None:
    sent = [mailbox.send(box, sender="api", to="web", subject=f"m{n}") for n in range(12)]
    subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all"], check=True)
    names = [f"refs/gitmail/web/inbox/{entry.message.id}" for entry in sent] + ["refs/gitmail/web/inbox/none"]
    one_at_a_time = {}
    for name in names:
        one_at_a_time.update(refs.resolve(box.path, [name]))  # a ref alone: bisected
    assert refs.resolve(box.path, names) == one_at_a_time == {n: str(e.oid) for n, e in zip(names, sent, strict=False)}
