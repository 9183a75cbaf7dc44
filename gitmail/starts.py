"""Session-start answers made when mail changes, not when a session starts.

Whoever changes a repository's mail (a send, a reply, done, reopen, a retraction, a sync that brought mail, a
session's end) starts `prepare` for that repository, detached, once its own write is durable (arrivals.py). For every
work tree where a session of the repository started before (its kept answer's key says which host, under which PATH
and wake setting), it works out what a new session would be shown there (delivery.preview_start) and keeps that
answer under the key hook.sh checks, made from the stamps read before the mail was, so an answer never holds less
than what was written before its key's stamps. hook.sh then answers a new session's start from it without Python,
and starts `record` detached, with closed stdio, for the receipts of what it showed. Python answers a start itself
when the session has a record (resumed, cleared, compacted: it may have mail of its own), or when no fresh answer
exists."""

from __future__ import annotations

import os
from pathlib import Path

from gitmail.store import hookfiles
from gitmail.store.repository import Store

RECORDING = ".recording"  # beside a kept answer: its repository's ref, then the ids whose receipts are to write


def main(argv: list[str]) -> int:
    from gitmail.edge import contained

    if argv[:1] == ["prepare"] and len(argv) >= 3:
        repos = None if argv[2:] == ["*"] else argv[2:]
        contained(lambda: prepare(Store(argv[1]), repos), where="prepare", fallback=_none)
    elif argv[:1] == ["record"] and len(argv) == 3:
        contained(lambda: record(argv[1], Path(argv[2])), where="record a kept start", fallback=_none)
    return 0


def _none(line: str) -> None:
    return None


def prepare(store: Store, repos: list[str] | None) -> None:
    """Keep, for each work tree a session of these repositories started in, the answer a new session would get."""
    from gitmail.values.names import RepoName

    wanted = {RepoName.parse(r).ref for r in repos} if repos is not None else None
    folder = Path(hookfiles.folder(store.path, hookfiles.CACHE))
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".key"))
    except OSError:
        return
    for name in names:
        kept = _kept(folder / name)
        if kept is None or (wanted is not None and kept[1] not in wanted):
            continue
        _prepare_one(store, *kept)


def _kept(key_file: Path) -> tuple[str, str, str, str, bool, str] | None:
    """(host, repo ref, work tree, wake setting, watch, PATH) of a kept answer, from its key and file name."""
    try:
        line = key_file.read_text(encoding="utf-8", errors="surrogateescape").split("\n", 1)[0]
    except OSError:
        return None
    host, _, tree = key_file.name[: -len(".key")].partition("-")
    fields = line.split(":", 6)
    if host not in ("claude", "codex") or len(fields) != 7:
        return None
    top = tree.replace("%2F", "/")
    if hookfiles.tree_name(top) != tree:
        return None
    ref, wake, watch, path = fields[0], fields[4], fields[5] == "watch", fields[6]
    return host, ref, top, wake, watch, path


def _prepare_one(store: Store, host: str, ref: str, top: str, wake: str, watch: bool, path: str) -> None:
    from gitmail import delivery, hooks
    from gitmail.store import stamps, startcache
    from gitmail.values.names import RepoName, repo_problem
    from gitmail.workspace import Actor, Session, own_command, place

    found = place(top) if os.path.isdir(top) else None
    if found is None or repo_problem(found.name) or RepoName(found.name).ref != ref:
        return  # renamed, or gone: its next start asks Python
    os.environ["PATH"], os.environ["GITMAIL_WAKE"] = path, wake  # as the hook that kept it ran
    actor = Actor(RepoName(found.name), found.home, host, Session(host, "~new"), found)
    preview = delivery.preview_start(store, actor, command=own_command(), watch=watch)
    if preview is None:
        startcache.forget(store.path, host, found.top)
        return
    watched = [str(p) for p in stamps.ensure(store.path, actor.repo)] if watch else []
    reply = hooks.answer(host, delivery.Moment.START, "SessionStart", preview.text, watched)
    key = startcache.key(store.path, preview.stamps, watch=watch)
    receipts = [ref, *preview.receipts] if preview.receipts else []
    quiet = hookfiles.quiet_line(preview.stamps, preview.quiet)
    startcache.keep(
        store.path, host, found.top, key=key, record=preview.record, answer=reply.stdout,
        due=hooks.due(store, actor.repo), config=found.config, quiet=quiet, recording=receipts,
    )  # fmt: skip


def record(host: str, kept: Path) -> None:
    """The receipts of what a kept answer showed a new session (hook.sh starts this, detached, once it answered)."""
    from gitmail import mailbox
    from gitmail.store.opening import open_mailbox
    from gitmail.values.names import RepoName

    try:
        lines = (kept.parent / (kept.name + RECORDING)).read_text(encoding="ascii").split()
    except (OSError, ValueError):
        return
    if len(lines) < 2:
        return
    store = open_mailbox()
    repo = RepoName.from_ref(lines[0])
    wanted = set(lines[1:])
    shown = [e for e in mailbox.pending(store, repo=repo).directed if e.message.id in wanted]
    if shown:
        mailbox.record_shown(store, repo=str(repo), shown=shown, host=host, moment="session-start")
