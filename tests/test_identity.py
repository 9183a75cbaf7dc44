from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import unicodedata
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.errors import GitmailError, UsageError
from gitmail.store import stamps
from gitmail.store.repository import Store
from gitmail.values.names import RepoName, first_format_ref, name_problem, nfc_keys
from gitmail.workspace import repo_of, toplevel
from tests.conftest import RepoFactory, mailbox_snapshot, run_gitmail

NFD = unicodedata.normalize("NFD", "données")


@pytest.mark.parametrize(
    "name", ["web", "My App", "données", "a.b", "x-y_z", "%41", "日本語", "a..b", "x.lock", "-dash", "WEB", "Ωmega"]
)
def test_any_directory_name_round_trips_through_a_ref_component(name: str) -> None:
    repo = RepoName.parse(name)
    assert RepoName.from_ref(repo.ref) == name
    assert all(c in "abcdefghijklmnopqrstuvwxyz0123456789-_%ABCDEF" for c in repo.ref)


def test_common_lowercase_names_are_their_own_ref_and_stamp_file_name() -> None:
    # The shell hook names a stamp file after the folder name when it is made of these characters only.
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_"
    rng = random.Random(6)
    names = ["web", "my-app", "api_v2", *("".join(rng.choices(alphabet, k=rng.randint(1, 40))) for _ in range(2000))]
    for name in (n for n in names if not n.startswith("_")):
        assert RepoName.parse(name).ref == name
        assert os.path.basename(stamps.path("/mail.git", RepoName.parse(name))) == name


def test_ref_encoding_percent_encodes_everything_else() -> None:
    assert RepoName.parse("My App").ref == "%4Dy%20%41pp"
    assert RepoName.parse("Web").ref == "%57eb"
    assert RepoName.parse("données").ref == "donn%C3%A9es"
    assert RepoName.parse("a.b").ref == "a%2Eb"


def test_names_are_kept_in_nfc_wherever_they_come_from() -> None:
    assert NFD != "données"
    assert RepoName.parse(NFD) == "données" and RepoName(NFD) == "données"
    assert RepoName.parse(NFD).ref == RepoName.parse("données").ref
    assert nfc_keys({NFD: "/from/macos", "api": "/src/api"}) == {"données": "/from/macos", "api": "/src/api"}
    assert nfc_keys({"données": "/typed", NFD: "/from/macos"}) == {"données": "/typed"}


def test_no_two_names_share_a_ref_where_case_and_normalisation_are_ignored() -> None:
    """As a case-insensitive, normalising file system sees ref components: folded, in any normal form."""
    letters = [
        "a",
        "A",
        "e",
        "E",
        "é",
        "É",
        "e\u0301",
        "ß",
        "ss",
        "SS",
        "ς",
        "σ",
        "Σ",
        "%",
        "%4",
        ".",
        "-",
        "ﬁ",
        "K",
        "\u212a",
    ]
    names = {"".join(p) for n in range(1, 4) for p in itertools.product(letters, repeat=n)}
    names |= {"Web", "web", "WEB", "wEb", "Données", "données", NFD, "DONNÉES", "%57eb", "%4Dy", "%4dy", "My App"}
    seen: dict[str, str] = {}
    for raw in sorted(names):
        if name_problem(raw):
            continue
        name = RepoName.parse(raw)
        assert name.ref.isascii()
        key = unicodedata.normalize("NFD", name.ref).casefold()
        assert seen.setdefault(key, name) == name, (seen[key], name)


@pytest.mark.parametrize(
    "component",
    ["Web", "%77eb", "%4dy", "donne%CC%81es", "%FF", "a.b", "%2e%2e", "", "_broadcast", "a%2", "%4D%79"],
)
def test_only_the_canonical_encoding_is_a_ref_name(component: str) -> None:
    with pytest.raises(UsageError, match="not a gitmail ref name|invalid repo name"):
        RepoName.from_ref(component)


def test_the_first_formats_spellings_are_read_back_as_names_in_nfc() -> None:
    assert RepoName.from_first_format_ref("Web") == "Web"
    assert RepoName.from_first_format_ref("My%20App") == "My App"
    assert RepoName.from_first_format_ref("donne%CC%81es") == "données"
    assert first_format_ref(NFD) == "donne%CC%81es"
    for component in ["%57eb", "My App", "%4d"]:
        with pytest.raises(UsageError):
            RepoName.from_first_format_ref(component)


def test_author_addresses_stay_readable_and_as_before() -> None:
    assert RepoName.parse("My App").address == "My%20App"
    assert RepoName.parse(NFD).address == "donn%C3%A9es"
    assert RepoName.parse("web").address == "web"


def test_git_accepts_every_encoded_name(tmp_path: Path) -> None:
    for name in ["My App", "données", "a.b", "x.lock", "..x", "~^:?*[\\"]:
        ref = f"refs/gitmail/{RepoName.parse(name).ref}/inbox/0123456789"
        assert subprocess.run(["git", "check-ref-format", ref]).returncode == 0, name


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("a/b", "'/'"),
        ("a\nb", "control"),
        ("a\x1b[31mb", "control"),
        ("_private", "reserved"),
        ("_broadcast", "reserved"),
        ("..", "not a directory name"),
        ("x" * 201, "too long"),
        ("W" * 67, "too long"),
        ("w\udcffb", "not valid UTF-8"),
    ],
)
def test_unusable_names_are_refused_with_the_reason(raw: str, problem: str) -> None:
    with pytest.raises(UsageError, match=problem):
        RepoName.parse(raw)


def test_toplevel_is_found_from_a_subdirectory(repos: object, tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    assert toplevel(deep) == str(repo.resolve())
    assert repo_of(deep)[0] == "proj"


def test_linked_worktree_is_its_own_toplevel(tmp_path: Path) -> None:
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run(["git", "-C", str(main), "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tmp_path / "feature")], check=True)
    assert toplevel(tmp_path / "feature") == str((tmp_path / "feature").resolve())
    expected = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=tmp_path / "feature", capture_output=True, text=True
    ).stdout.strip()
    assert str(toplevel(tmp_path / "feature")) == expected


def test_symlinked_directory_resolves_like_git(tmp_path: Path) -> None:
    real = tmp_path / "real-name"
    subprocess.run(["git", "init", "-q", str(real)], check=True)
    os.symlink(real, tmp_path / "alias")
    assert repo_of(tmp_path / "alias")[0] == "real-name"


def test_outside_any_repository_there_is_no_identity(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert toplevel(plain) is None
    with pytest.raises(GitmailError, match="not inside a git repository"):
        repo_of(plain)


def test_a_folder_name_that_cannot_be_a_mailbox_name_says_so(tmp_path: Path) -> None:
    odd = tmp_path / "_scratch"
    subprocess.run(["git", "init", "-q", str(odd)], check=True)
    with pytest.raises(UsageError, match="reserved.*--from/--repo"):
        repo_of(odd)


def test_an_nfd_folder_name_is_the_same_repo_as_its_nfc_spelling(tmp_path: Path) -> None:
    folder = tmp_path / NFD
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    assert repo_of(folder)[0] == "données"


# -- names that are not UTF-8, at every boundary -----------------------------------------------------------------

BAD = "w\udcffb"  # the bytes b"w\xffb" as Python hands them over from the command line and from file names
NOT_A_NAME = "invalid repo name 'w\\udcffb': it is not valid UTF-8"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["send", "--to", BAD, "-s", "hi", "--from", "api"], NOT_A_NAME),
        (["send", "--to", "web", "-s", "hi", "--from", BAD], NOT_A_NAME),
        (["send", "--to", "web", "-s", f"hi {BAD}", "--from", "api"], "the subject is not valid UTF-8 text"),
        (["send", "--to", "web", "-s", "hi", "-m", f"see {BAD}", "--from", "api"], "the body is not valid UTF-8 text"),
        (["inbox", "--repo", BAD], NOT_A_NAME),
        (["log", "--repo", BAD], NOT_A_NAME),
        (["done", "--all", "--repo", BAD], NOT_A_NAME),
        (["reopen", "0123456789", "--repo", BAD], NOT_A_NAME),
    ],
)
def test_arguments_that_are_not_utf8_are_one_usage_error(args: list[str], line: str, tmp_path: Path) -> None:
    box = Store()
    mailbox.send(box, sender="api", to="web", subject="already here")
    before = mailbox_snapshot(box.path)
    result = run_gitmail(*args, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"gitmail: error: {line}\n")
    assert mailbox_snapshot(box.path) == before


def test_a_repository_whose_folder_name_is_not_utf8_gets_one_usage_error(repos: RepoFactory) -> None:
    folder = repos(BAD)
    line = (
        "gitmail: error: this repository's folder name 'w\\udcffb' cannot be a mailbox name: it is not valid UTF-8 "
        "(name one with --from/--repo)\n"
    )
    for args in (["send", "--to", "web", "-s", "hi"], ["inbox"], ["log"], ["done", "--all"]):
        result = run_gitmail(*args, cwd=folder)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", line), args
    assert not Store().path.exists()


def test_the_hook_is_silent_in_a_repository_whose_folder_name_is_not_utf8(repos: RepoFactory) -> None:
    mailbox.send(Store(), sender="api", to="web", subject="for someone else")
    folder = repos(BAD)
    start = {"hook_event_name": "SessionStart", "source": "startup", "session_id": "s1"}
    for payload in (start, {**start, "cwd": str(folder)}):
        result = run_gitmail("hook", "session-start", cwd=folder, stdin=json.dumps(payload))
        assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
