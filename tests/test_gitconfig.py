"""The one git config reader against git itself: every key of a corpus of config files reads as `git config --get`
reads it, and what the reader does not follow it says so instead of guessing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store import gitconfig
from gitmail.store.repository import Store
from tests.hooked import Session

CORPUS = {
    "plain": "[core]\n\tbare = true\n[gitmail]\n\tversion = 2\n",
    "no equals": "[gitmail]\n\twake\n\treceipts = false\n",
    "quoted": '[gitmail]\n\tname = "  spaced  out  "\n\tnote = a "b  c" d\n',
    "comments": "# top\n; also\n[gitmail] ; here\n\tmachine = laptop # trailing\n\tother = x;y\n",
    "escapes": '[gitmail]\n\tpath = "C:\\\\dir\\\\x"\n\tq = say \\"hi\\"\n\ttab = a\\tb\n',
    "continued": "[gitmail]\n\tlong = first \\\n  second\n",
    "inner spaces": "[gitmail]\n\tspaced = a   b\t\tc   \n",
    "subsections": '[gitmail-remote "origin"]\n\turl = /srv/mail.git\n\tauto = true\n[gitmail-remote "Two Words"]\n\turl = x\n',
    "legacy subsection": "[Gitmail-Remote.Origin]\n\tURL = /old\n",
    "same line": "[gitmail] wakeLimit = 3\n",
    "case": "[GitMail]\n\tWakeWindow = 60\n",
    "last wins": "[gitmail]\n\tv = 1\n[gitmail]\n\tv = 2\n",
    "crlf": "[gitmail]\r\n\tcrlf = yes\r\n",
    "empty value": "[gitmail]\n\tempty =\n",
    "include": "[gitmail]\n\tv = before\n[include]\n\tpath = extra.inc\n[gitmail]\n\tafter = 1\n",
    "missing include": "[include]\n\tpath = nowhere.inc\n[gitmail]\n\tv = ok\n",
    "nested include": "[include]\n\tpath = sub/first.inc\n",
    "hash in quotes": '[gitmail]\n\tv = "a # not a comment"\n',
}
INCLUDED = {
    "extra.inc": "[gitmail]\n\tv = from include\n\tincluded = yes\n",
    "sub/first.inc": "[include]\n\tpath = second.inc\n[gitmail]\n\tfirst = 1\n",
    "sub/second.inc": "[gitmail]\n\tsecond = 2\n",
}


def keys(path: Path) -> list[str]:
    out = subprocess.run(
        ["git", "config", "--file", str(path), "--includes", "--list", "--name-only"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(set(out.splitlines()))


def git_get(path: Path, key: str) -> str:
    return subprocess.run(
        ["git", "config", "--file", str(path), "--includes", "--get", key], capture_output=True, text=True
    ).stdout.removesuffix("\n")


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_key_reads_as_git_config_get_reads_it(tmp_path: Path, name: str) -> None:
    for file, text in INCLUDED.items():
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file).write_text(text)
    config = tmp_path / "config"
    config.write_bytes(CORPUS[name].encode())
    found = gitconfig.load(config)
    assert found is not None
    listed = keys(config)
    assert listed, "the corpus entry defines keys"
    for key in listed:
        assert found.get(key) == git_get(config, key), key


def test_subsections_are_listed_with_their_keys(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(CORPUS["subsections"])
    found = gitconfig.load(config)
    assert found is not None
    assert found.subsections("gitmail-remote") == {
        "origin": {"url": "/srv/mail.git", "auto": "true"},
        "Two Words": {"url": "x"},
    }


@pytest.mark.parametrize(
    "text",
    ['[includeIf "gitdir:/x/"]\n\tpath = y\n', "[gitmail\n\tv = 1\n", '[gitmail]\n\tv = "open\n', "v = 1\n"],
)
def test_what_the_reader_does_not_follow_is_left_to_git(tmp_path: Path, text: str) -> None:
    config = tmp_path / "config"
    config.write_text(text)
    assert gitconfig.load(config) is None


def test_a_missing_file_is_an_empty_config(tmp_path: Path) -> None:
    found = gitconfig.load(tmp_path / "none")
    assert found is not None and found.get("gitmail.version") is None


def test_booleans_read_as_git_reads_them(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("[gitmail]\n\ta\n\tb = off\n\tc = Yes\n\td = maybe\n")
    found = gitconfig.load(config)
    assert found is not None
    assert [found.flag(f"gitmail.{k}", default=False) for k in "abcd"] == [True, False, True, False]
    assert found.flag("gitmail.e", default=True) is True


def test_a_session_start_reads_each_config_file_once(web: Path, box: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hooks read the repository's config (its name) and the mailbox's (its settings), each once however many
    settings a run asks for: one hook run is one process."""
    for number in range(3):
        mailbox.send(box, sender="api", to="web", subject=f"hello {number}")
    reads: list[str] = []
    load = gitconfig.load

    def counted(path: str | os.PathLike[str]) -> gitconfig.Config | None:
        reads.append(os.fspath(path))
        return load(path)

    monkeypatch.setattr(gitconfig, "load", counted)
    assert "hello 2" in Session(web, "s1")("session-start", hook_event_name="SessionStart", source="resume")
    assert sorted(reads) == sorted({str(web / ".git" / "config"), str(box.path / "config")})
