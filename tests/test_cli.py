from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from tests.conftest import CliRunner, RepoFactory, Result, mailbox_snapshot
from tests.processes import loaded


def one_line_error(result: Result, code: int, text: str) -> None:
    """A user mistake: one line on stderr, nothing on stdout, the given exit code, no traceback."""
    assert result.code == code, result
    assert result.out == ""
    assert result.err.startswith("gitmail: error: ") and result.err.count("\n") == 1, result.err
    assert text in result.err, result.err


def send(cli: CliRunner, cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    result = cli("send", *args, cwd=cwd, stdin=stdin)
    assert result.code == 0, result
    return result.out.strip()


def test_send_prints_the_id_alone_and_confirms_on_stderr(cli: CliRunner, api: Path, web: Path) -> None:
    result = cli("send", "--to", "web", "--subject", "Schema v2", "--message", "Details", cwd=api)
    assert result.code == 0
    assert len(result.out) == 11 and result.out.endswith("\n")
    message_id = result.out.strip()
    assert result.err == (
        'gitmail: note: no repo named "web" has used this mailbox yet; it gets the message when a session starts '
        f'in a repository of that name\ngitmail: sent {message_id} to the repository "web"\n'
    )
    second = cli("send", "--to", "web", "-s", "again", "-m", "", cwd=api)
    assert "no repo named" not in second.err  # web has mail now: it is a known name


def test_a_repo_writing_to_itself_is_not_told_its_name_is_new(cli: CliRunner, web: Path) -> None:
    result = cli("send", "--to", "web", "-s", "a note to the other sessions here", cwd=web)
    assert result.code == 0 and result.err == f'gitmail: sent {result.out.strip()} to the repository "web"\n'


def test_the_body_comes_from_standard_input(cli: CliRunner, api: Path) -> None:
    message_id = send(cli, api, "--to", "web", "-s", "piped", stdin=b"line 1\nline 2\n")
    assert mailbox.show(Store(), message_id).message.body == "line 1\nline 2\n"


def test_the_sender_is_the_git_toplevel_or_from(cli: CliRunner, api: Path) -> None:
    sub = api / "src"
    sub.mkdir()
    from_sub = send(cli, sub, "--to", "web", "-s", "x")
    explicit = send(cli, sub, "--to", "web", "-s", "y", "--from", "My App")
    assert mailbox.show(Store(), from_sub).message.sender == "api"
    assert mailbox.show(Store(), explicit).message.sender == "My App"


def test_inbox_shows_the_framing_and_done_archives(cli: CliRunner, api: Path, web: Path) -> None:
    message_id = send(cli, api, "--to", "web", "-s", "Schema v2", "-m", "Details")
    inbox = cli("inbox", cwd=web)
    assert inbox.code == 0
    assert inbox.out.startswith('gitmail: 1 message for "web" (1 directed, 0 broadcasts).\n')
    assert f'--- message 1 of 1: id {message_id} · directed to "web" · from "api" (PEER)' in inbox.out
    assert "> Details\n" in inbox.out
    done = cli("done", message_id[:6], cwd=web)
    assert (done.code, done.out, done.err) == (0, "", f'gitmail: archived {message_id} from "api": "Schema v2"\n')
    again = cli("done", message_id, cwd=web)
    assert again.code == 0 and "already archived" in again.err
    empty = cli("inbox", cwd=web)
    assert (empty.code, empty.out, empty.err) == (0, "", 'gitmail: no mail for "web"\n')


def test_inbox_json_and_peek(cli: CliRunner, api: Path, web: Path) -> None:
    cast = send(cli, api, "--broadcast", "-s", "all")
    peeked = json.loads(cli("inbox", "--json", "--peek", cwd=web).out)
    assert [m["id"] for m in peeked["broadcasts"]] == [cast]
    taken = json.loads(cli("inbox", "--json", cwd=web).out)
    assert [m["id"] for m in taken["broadcasts"]] == [cast]
    assert json.loads(cli("inbox", "--json", cwd=web).out)["broadcasts"] == []


def test_reads_outside_a_repository_print_nothing(cli: CliRunner, tmp_path: Path, api: Path) -> None:
    send(cli, api, "--to", "web", "-s", "x")
    plain = tmp_path / "plain"
    plain.mkdir()
    result = cli("log", cwd=plain)
    assert (result.code, result.out) == (0, ""), result
    assert result.err == "gitmail: not inside a git repository; name one with --repo\n"
    result = cli("inbox", cwd=plain)  # outside any repository, the inbox is the person's own
    assert (result.code, result.out, result.err) == (0, "", 'gitmail: no mail for "@user"\n'), result
    assert cli("inbox", "--repo", "web", cwd=plain).out.startswith("gitmail: 1 message")


def test_writes_outside_a_repository_are_refused_and_create_nothing(cli: CliRunner, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    one_line_error(cli("send", "--to", "web", "-s", "x", cwd=plain), 1, "is not inside a git repository")
    one_line_error(cli("done", "--all", cwd=plain), 1, "name one with --from/--repo")
    assert not Store().path.exists()


def test_reply_retract_log_and_show(cli: CliRunner, api: Path, web: Path) -> None:
    question = send(cli, api, "--to", "web", "-s", "Which port?")
    answer = send(cli, web, "--reply-to", question, "-m", "8080")
    assert json.loads(cli("inbox", "--json", cwd=web).out)["directed"] == []
    shown = json.loads(cli("show", answer, "--json").out)
    assert (shown["to"], shown["subject"], shown["reply_to"], shown["state"]) == (
        "api",
        "Re: Which port?",
        question,
        "pending",
    )
    thread = cli("log", "--thread", answer, cwd=web).out.splitlines()
    assert [line.split()[0] for line in thread] == [question, answer]
    cast = send(cli, api, "--broadcast", "-s", "Freeze")
    one_line_error(cli("send", "--retract", cast, cwd=web), 1, "only its sender can retract it")
    retracted = cli("send", "--retract", cast, cwd=api)
    assert (retracted.code, retracted.out, retracted.err) == (0, "", f"gitmail: retracted {cast}\n")
    assert cli("send", "--retract", cast, cwd=api).err == f"gitmail: {cast} was already retracted\n"
    log = cli("log", cwd=web).out.splitlines()
    assert [line.split()[0:6:4] + line.split()[5:6] for line in log] == [
        [cast, "retracted", "api"],
        [answer, "pending", "web"],
        [question, "replied", answer],
    ]
    assert len(json.loads(cli("log", "--everyone", "--json", "-n", "2").out)) == 2
    card = cli("show", question[:5]).out
    assert card.startswith(f'--- message id {question} · directed to "web" · from "api" (PEER)')
    assert f"· replied {answer}\n" in card


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["send", "--to", "web"], 2, "a subject is required"),
        (["send", "--to", "web", "-s", ""], 2, "the subject is empty"),
        (["send", "--to", "web", "-s", " \n\t "], 2, "the subject is empty"),
        (["send", "-s", "x"], 2, "give exactly one of --to, --broadcast, --reply-to or --retract"),
        (["send", "--to", "web", "--broadcast", "-s", "x"], 2, "(got --to and --broadcast)"),
        (["send", "--to", "a/b", "-s", "x"], 2, "invalid repo name 'a/b': it contains '/'"),
        (["send", "--to", "_all", "-s", "x"], 2, "names starting with '_' are reserved"),
        (["send", "--to", "web", "-s", "x", "--from", "a\nb"], 2, "it contains control characters"),
        (["send", "--to", "web", "-s", "x" * 201], 2, "the limit is 200"),
        (["send", "--retract", "0000000000", "-s", "x"], 2, "--retract takes no --subject"),
        (["send", "--to", "web", "-s", "x", "--bogus"], 2, "No such option: --bogus"),
        (["done", "zzzzzz"], 1, "no message with id zzzzzz"),
        (["done", "ab!"], 2, "'ab!' is not a message id"),
        (["done"], 2, "name the messages to mark done, or ask for all of them with --all (not both)"),
        (["show", "0000000000"], 1, "no message with id 0000000000"),
        (["log", "--repo", "web", "--everyone"], 2, "--everyone takes no --repo"),
        (["log", "-n", "0"], 2, "-n"),
        (["frobnicate"], 2, "No such command 'frobnicate'"),
    ],
)
def test_user_mistakes_get_one_line_and_change_nothing(
    cli: CliRunner, api: Path, args: list[str], code: int, text: str
) -> None:
    send(cli, api, "--to", "web", "-s", "existing")
    before = mailbox_snapshot(Store().path)
    one_line_error(cli(*args, cwd=api), code, text)
    assert mailbox_snapshot(Store().path) == before


@pytest.mark.parametrize(
    ("stdin", "text"),
    [
        (b"\xff\xfe", "the body is not valid UTF-8 text"),
        (b"x" * 70000, "the body is 65,537 bytes; the limit is 65,536"),
    ],
)
def test_bad_bodies_are_refused_whole(cli: CliRunner, api: Path, stdin: bytes, text: str) -> None:
    one_line_error(cli("send", "--to", "web", "-s", "x", cwd=api, stdin=stdin), 2, text)
    assert not Store().path.exists()


def test_ambiguous_ids_list_the_candidates(cli: CliRunner, api: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = iter(["abcd000000", "abcd111111"])
    monkeypatch.setattr("gitmail.mailbox.composing.new_id", lambda: next(made))
    send(cli, api, "--to", "web", "-s", "1")
    send(cli, api, "--to", "web", "-s", "2")
    one_line_error(cli("show", "abcd"), 2, "id abcd is ambiguous: it matches abcd000000, abcd111111")


def test_an_ambiguous_prefix_names_ten_candidates_and_counts_the_rest(
    cli: CliRunner, box: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = iter(f"abcd{n:06d}" for n in range(25))
    monkeypatch.setattr("gitmail.mailbox.composing.new_id", lambda: next(made))
    for n in range(25):
        mailbox.send(box, sender="api", to="web", subject=str(n))
    listed = ", ".join(f"abcd{n:06d}" for n in range(10))
    one_line_error(cli("show", "ab"), 2, f"id ab is ambiguous: it matches {listed} and 15 more\n")


def test_json_escapes_what_a_terminal_or_a_script_would_act_on_or_hide(cli: CliRunner, api: Path, web: Path) -> None:
    body = "line\u2028separator \x85next \u202eevil\u202c \u200bzero \x1b[31m red é 中 👍"
    sent = send(cli, api, "--to", "web", "-s", "json", stdin=body.encode())
    for args, where in (
        (["show", sent, "--json"], []),
        (["log", "--json"], [0]),
        (["inbox", "--json"], ["directed", 0]),
    ):
        result = cli(*args, cwd=web)
        assert result.code == 0, (args, result)
        found = json.loads(result.out)
        for key in where:
            found = found[key]
        assert found["body"] == body, args  # the same JSON
        for raw in ("\u2028", "\x85", "\u202e", "\u200b", "\x1b"):
            assert raw not in result.out, (args, repr(raw))
        assert "é 中 👍" in result.out


def test_archiving_another_repos_message_is_refused(cli: CliRunner, api: Path, web: Path) -> None:
    message_id = send(cli, api, "--to", "db", "-s", "for db")
    one_line_error(cli("done", message_id, cwd=web), 1, f"{message_id} is addressed to 'db', not to 'web'")


@pytest.mark.parametrize(
    ("setup", "text"),
    [
        (lambda p: p.write_text("x"), "exists but is not a directory"),
        (lambda p: (p.mkdir(), (p / "notes.txt").write_text("x")), "is not a git repository"),
        (
            lambda p: p.symlink_to(p.with_name("gone.git")),
            "bad.git is a dangling symbolic link (to {tmp}/gone.git, which does not exist); point GITMAIL_DIR at the "
            "mailbox itself, or create what the link names",
        ),
    ],
)
def test_a_bad_mailbox_path_is_one_line(
    cli: CliRunner, api: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: object, text: str
) -> None:
    path = tmp_path / "bad.git"
    setup(path)  # type: ignore[operator]
    monkeypatch.setenv("GITMAIL_DIR", str(path))
    for args in (["send", "--to", "web", "-s", "x"], ["inbox"], ["log"], ["done", "--all"]):
        one_line_error(cli(*args, cwd=api), 1, text.format(tmp=tmp_path))
    doctor = cli("doctor", cwd=api)
    assert doctor.code == 1 and doctor.err == "" and text.format(tmp=tmp_path) in doctor.out, doctor


def test_help_is_written_for_users(cli: CliRunner) -> None:
    top = cli("--help")
    assert top.code == 0 and "A private mailbox between AI coding sessions" in top.out
    for command in ("send", "inbox", "done", "log", "show"):
        assert cli(command, "--help").code == 0
    assert "Prints the new message's id alone" in cli("send", "--help").out
    assert cli().out.startswith("Usage: gitmail")
    assert cli("--version").out == "gitmail 0.1.0\n"


def test_a_name_read_from_a_second_path_is_warned_about(cli: CliRunner, repos: RepoFactory, api: Path) -> None:
    send(cli, api, "--to", "web", "-s", "x")
    first = repos("one/web")
    second = repos("two/web")
    assert "Note: the name" not in cli("inbox", cwd=first).out
    out = cli("inbox", cwd=second).out
    assert f'Note: the name "web" was first used by the repository at "{first.resolve()}"' in out


@pytest.mark.parametrize(("args", "blocked", "extra"), [(["view", "--no-open"], "jinja2", "view")])
def test_a_command_whose_extra_is_missing_says_in_one_line_how_to_install_it(
    web: Path, args: list[str], blocked: str, extra: str
) -> None:
    done, _ = loaded(*args, cwd=web, missing=[blocked])
    command = " ".join(["gitmail", *args[:2]]) if args[0] == "install" else f"gitmail {args[0]}"
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"gitmail: error: `{command}` needs gitmail's {extra} extra ({blocked} is not installed): "
        f"pip install 'gitmail[{extra}]'\n"
    )


@pytest.mark.parametrize("args", [["mcp"], ["mcp", "--print-config"], ["install", "--mcp", "--claude", "--dry-run"]])
def test_the_mcp_server_needs_neither_the_sdk_nor_watchfiles(web: Path, home: Path, args: list[str]) -> None:
    """`gitmail mcp` speaks the protocol itself, watches for new mail by polling where watchfiles is missing, and
    is started before the command-line library is loaded (its client waits for its first answer)."""
    (home / ".claude").mkdir(exist_ok=True)
    asked = '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}\n'
    done, modules = loaded(*args, cwd=web, stdin=asked, missing=["mcp", "mcp_types", "watchfiles"])
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr
    if args == ["mcp"]:
        assert json.loads(done.stdout)["result"]["serverInfo"]["name"] == "gitmail"
        assert not {m for m in modules if m.split(".")[0] in ("typer", "click")}
    else:
        assert '"gitmail"' in done.stdout


def test_the_quick_path_knows_every_option_as_typer_does() -> None:
    """cli/plain.py parses the plain forms of the mail commands without typer: each option it knows must be one of
    typer's for that command, with the same parameter and kind (flag or value), and each of typer's must be known."""
    import typer

    from gitmail.cli import plain
    from gitmail.cli.app import app

    group = typer.main.get_command(app)
    for name, spec in plain.specs().items():
        command = group.commands[name]  # type: ignore[attr-defined]
        typer_options: dict[str, tuple[str, bool]] = {}
        positional = None
        for param in command.params:
            if param.param_type_name == "argument":
                positional = param.name
                continue
            for spelling in param.opts:
                typer_options[spelling] = (param.name, bool(param.is_flag))
        quick_options = {
            **{k: (v, False) for k, v in spec.options.items()},
            **{k: (v, True) for k, v in spec.flags.items()},
        }
        assert quick_options == {k: v for k, v in typer_options.items() if k not in ("--help", "-h")}, name
        assert spec.positional == positional, name
        assert set(plain.DEFAULTS[name]) | ({spec.positional} if spec.positional else set()) == {
            p.name for p in command.params if p.name != "help"
        }, name


@pytest.mark.parametrize(
    "args",
    [
        ["send", "--help"],
        ["send", "--to", "web", "-s", "x", "--", "y"],
        ["send", "-m", "-5 degrees", "--to", "web", "-s", "x"],
        ["log", "-n", "0"],
        ["show"],
        ["inbox", "extra"],
    ],
)
def test_what_is_not_a_plain_form_goes_to_typer(args: list[str]) -> None:
    from gitmail.cli import plain

    spec = plain.specs()[args[0]]
    assert plain.parse(spec, args[0], args[1:]) is None
