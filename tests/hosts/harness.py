"""The real hosts, driven as a user drives them, inside a throwaway world.

A World is one user's machine in miniature: a fresh HOME (so ~/.gitmail, ~/.claude are the test's own), a fresh
CODEX_HOME outside it, git repositories to work in, and the model stub every host is pointed at. A Host is Claude Code
(with gitmail installed by `gitmail install --claude`, or as a plugin with --plugin-dir) or Codex (`gitmail install
--codex`). Each host runs one-shot turns as its command line does (`claude -p`, `codex exec`, with --resume /
`exec resume`) and opens sessions that stay open across prompts (Claude Code's stream-json input, Codex's app-server).

Where each host puts hook context, and in which role, is asserted here, once per host (`delivered`).
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from gitmail.install import codex_trust
from tests.conftest import REAL_HOME
from tests.hosts.stub import Request, Stub

ROOT = Path(__file__).resolve().parents[2]
TURN_TIMEOUT = 90.0  # seconds one turn of a host may take before the test fails
CACHE = Path(
    os.environ.get("GITMAIL_HOSTS_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or REAL_HOME / ".cache") / "gitmail-hosts"
)
CLAUDE_PREFIX = "SessionStart hook additional context: "
_probes = itertools.count()


class Unavailable(NamedTuple):
    """Why the host suite cannot run here: a reason to skip it (no Node.js) or to fail it (npm failed)."""

    reason: str
    skip: bool


def find_binaries() -> dict[str, Path] | Unavailable:
    """The host programs to drive: $GITMAIL_TEST_CLAUDE / $GITMAIL_TEST_CODEX if set, else the pinned versions that
    scripts/hosts installs (on first use) into the cache."""
    chosen = {name: os.environ.get(f"GITMAIL_TEST_{name.upper()}") for name in ("claude", "codex")}
    if all(chosen.values()):
        return {name: Path(str(path)) for name, path in chosen.items()}
    if shutil.which("node") is None or shutil.which("npm") is None:
        return Unavailable("Node.js and npm are needed to install Claude Code and Codex for the host tests", skip=True)
    env = {**os.environ, "HOME": str(REAL_HOME), "GITMAIL_HOSTS_CACHE": str(CACHE)}  # npm keeps its cache in HOME
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "hosts"), "--json"], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        return Unavailable(f"scripts/hosts could not install the hosts: {done.stderr.strip()[-2000:]}", skip=False)
    pinned = {name: Path(found["path"]) for name, found in json.loads(done.stdout).items()}
    return {name: Path(path) if path else pinned[name] for name, path in chosen.items()}


# -- the world ------------------------------------------------------------------------------------------------------


@dataclass
class World:
    root: Path
    home: Path
    stub: Stub
    binaries: dict[str, Path]
    codex_home: Path = field(init=False)

    def __post_init__(self) -> None:
        self.codex_home = self.root / "codex-home"  # outside HOME: gitmail must find it through $CODEX_HOME
        self.codex_home.mkdir()
        (self.codex_home / "config.toml").write_text(
            f"""\
# The model stub stands in for the model service; nothing here reaches beyond this machine.
model = "stub-model"
model_provider = "stub"
check_for_update_on_startup = false
# Commands run in the sandbox of a user who lets Codex work on a repository ("Auto": workspace-write).
sandbox_mode = "workspace-write"

[model_providers.stub]
name = "stub"
base_url = "{self.stub.url}/v1"
wire_api = "responses"
env_key = "STUB_API_KEY"

# The world lives under /tmp, which the workspace-write sandbox lets commands write; excluding it makes the
# world's HOME as closed to them as a real home directory is.
[sandbox_workspace_write]
exclude_slash_tmp = true
exclude_tmpdir_env_var = true

[features]
plugins = false

[analytics]
enabled = false
"""
        )

    def env(self, **extra: str) -> dict[str, str]:
        """What a host runs with: the PATH of a user who installed gitmail in a virtualenv and did not activate it
        (the hosts on it, no `gitmail`), the world's HOME and CODEX_HOME, the stub as model service and as the only
        proxy, and nothing that phones home."""
        inherited = [
            d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "gitmail").exists()
        ]
        hosts = [str(path.parent) for path in self.binaries.values()]
        proxy = self.stub.url
        env = {
            "PATH": os.pathsep.join(dict.fromkeys([*hosts, *inherited])),
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "LANG": "C.UTF-8",
            "TMPDIR": str(self.root / "tmp"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig"),
            "ANTHROPIC_BASE_URL": self.stub.url,
            "ANTHROPIC_API_KEY": "stub-key",
            "STUB_API_KEY": "stub-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "HTTPS_PROXY": proxy,
            "HTTP_PROXY": proxy,
            "https_proxy": proxy,
            "http_proxy": proxy,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        (self.root / "tmp").mkdir(exist_ok=True)
        return {**env, **extra}

    def repo(self, name: str) -> Path:
        path = self.root / "work" / name
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(path)], check=True, env=self.env())
        return path

    def gitmail(
        self, *args: str, cwd: Path | None = None, check: bool = True, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """gitmail as the user runs it from this virtualenv (not on PATH), in the world's environment."""
        done = subprocess.run(
            [sys.executable, "-m", "gitmail", *args],
            cwd=cwd or self.root,
            capture_output=True,
            text=True,
            env=self.env(**env),
            timeout=120,
        )
        assert not check or done.returncode == 0, done.stderr
        return done

    def hook(self, cwd: Path, moment: str = "session-start", host: str = "claude", **env: str) -> str | None:
        """What gitmail's hook prints at this moment for a session in `cwd` that knows nothing yet (directed mail
        only is deterministic: reading it hands nothing over): the context, or Codex's turn-end notice."""
        events = {"session-start": "SessionStart", "tool": "PostToolUse", "prompt": "UserPromptSubmit", "stop": "Stop"}
        payload = {"session_id": f"expected-{next(_probes)}", "cwd": str(cwd), "hook_event_name": events[moment]}
        done = subprocess.run(
            [sys.executable, "-m", "gitmail", "hook", moment, "--host", host],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=self.env(**env),
            cwd=cwd,
        )
        if not done.stdout:
            return None
        answer = json.loads(done.stdout)
        return str(answer["reason"]) if "reason" in answer else str(answer["hookSpecificOutput"]["additionalContext"])

    def gitmail_processes(self, settle: float = 5.0) -> list[str]:
        """gitmail's processes running in this world (its HOME in their environment): none may outlive a session.
        A detached writer a session's end started (its answers made anew, receipts) may take a moment to finish:
        those still running `settle` seconds later outlived it."""
        deadline = time.monotonic() + settle
        while (found := self._gitmail_processes()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return found

    def _gitmail_processes(self) -> list[str]:
        found = []
        for proc in Path("/proc").iterdir():
            try:
                environ = (proc / "environ").read_bytes().split(b"\0")
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if f"HOME={self.home}".encode() in environ and ("gitmail" in command or "hook.sh" in command):
                found.append(f"{proc.name}: {command}")
        return found


# -- turns and sessions ---------------------------------------------------------------------------------------------


@dataclass
class Turn:
    """One prompt's round trip through a host."""

    session_id: str
    requests: list[Request]  # the model requests of the host's main conversation made during this turn
    output: str  # what the host printed (or its events), for failure messages

    @property
    def first(self) -> Request:
        assert self.requests, f"the host sent no model request; it printed:\n{self.output[-3000:]}"
        return self.requests[0]


class Lines:
    """A child's standard output, read line by line with a deadline."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def until(self, wanted: Any, timeout: float = TURN_TIMEOUT) -> dict[str, Any]:
        """Read JSON lines until one satisfies `wanted`; return it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer within {timeout:.0f} s; so far:\n{''.join(self.seen[-20:])}") from None
            if line is None:
                raise AssertionError(
                    f"the host exited ({self.process.wait()}); it printed:\n{''.join(self.seen[-20:])}"
                )
            self.seen.append(line)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and wanted(message):
                return message


class Host:
    """A host program as the suite drives it. Subclasses know its command line, its sessions and its placement."""

    name = ""

    def __init__(self, world: World) -> None:
        self.world = world
        self.binary = world.binaries[self.name.split("-")[0]]

    host = ""  # the host gitmail's hooks answer as

    def install(self) -> None:
        """Put gitmail's hooks where this host finds them."""

    def uninstall(self) -> None:
        """Take gitmail's hook away again."""

    def run(self, cwd: Path, prompt: str, *, resume: str | None = None, fork: bool = False) -> Turn:
        raise NotImplementedError

    @property
    def settings(self) -> Path:
        """The file holding the user's hooks (and gitmail's, once installed)."""
        raise NotImplementedError

    def add_own_hook(self, name: str, *, context: str) -> None:
        """Add a SessionStart hook of the user's own, after every group already there, as a user edits the file; it
        hands the session `context`."""
        script = self.world.root / name
        output = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}
        script.write_text(f"#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' {shlex.quote(json.dumps(output))}\n")
        script.chmod(0o755)
        document = json.loads(self.settings.read_text()) if self.settings.exists() else {}
        groups = document.setdefault("hooks", {}).setdefault("SessionStart", [])
        groups.append({"hooks": [{"type": "command", "command": str(script)}]})
        self.settings.write_text(json.dumps(document, indent=2) + "\n")

    def session(self, cwd: Path, **env: str) -> Session:
        raise NotImplementedError

    def _turn(self, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        """One non-interactive run of the host, which must succeed."""
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=self.world.env(),
            capture_output=True,
            text=True,
            timeout=TURN_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"{self.name} exited {done.returncode}: {done.stderr[-2000:]}{done.stdout[-2000:]}"
        return done

    def hook_env(self) -> dict[str, str]:
        """What the host's gitmail hooks run with beyond the world's environment."""
        return {}

    def expected(self, cwd: Path, moment: str = "session-start") -> str | None:
        """What gitmail hands a session of this host in `cwd` that knows nothing yet, at this moment."""
        return self.world.hook(cwd, moment, self.host, **self.hook_env())

    def delivered(self, request: Request, *, first: bool = True) -> list[str]:
        """The SessionStart hook contexts in this request, from the one place the host puts them (asserting the
        place and the role). `first`: the request opens the conversation after a session start."""
        raise NotImplementedError

    def after_tool(self, request: Request) -> list[str]:
        """The hook contexts beside the last tool result in this request (asserting their place and role)."""
        raise NotImplementedError

    def with_prompt(self, request: Request) -> list[str]:
        """The hook contexts that came with the last prompt in this request (asserting their place and role)."""
        raise NotImplementedError

    def continuation(self, request: Request) -> str | None:
        """What a turn-end hook continued the turn with, when this request is that continuation."""
        raise NotImplementedError

    def _new_requests(self, since: int) -> list[Request]:
        return [r for r in self.world.stub.requests[since:] if r.shell_tool is not None]


class Session:
    """A host session that stays open across prompts: a host process reading JSON lines on its standard input."""

    session_id = ""
    process: subprocess.Popen[str]

    def prompt(self, text: str) -> Turn:
        raise NotImplementedError

    def compact(self) -> None:
        raise NotImplementedError

    def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        """End of input: the host finishes and exits (killed after 30 s)."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- Claude Code ----------------------------------------------------------------------------------------------------


class ClaudeCode(Host):
    """Claude Code with gitmail's hooks installed in ~/.claude/settings.json by `gitmail install --claude`."""

    name = "claude"
    host = "claude"

    @property
    def settings(self) -> Path:
        return self.world.home / ".claude" / "settings.json"

    def install(self) -> None:
        self.world.gitmail("install", "--claude")

    def uninstall(self) -> None:
        self.world.gitmail("uninstall", "--claude")

    def args(self) -> list[str]:
        return [str(self.binary), "--allowedTools", "Bash", "--output-format", "stream-json", "--verbose"]

    def run(self, cwd: Path, prompt: str, *, resume: str | None = None, fork: bool = False) -> Turn:
        since = len(self.world.stub.requests)
        extra = (["--resume", resume] if resume else []) + (["--fork-session"] if fork else [])
        done = self._turn([*self.args(), *extra, "-p", prompt], cwd)
        result = next(json.loads(line) for line in reversed(done.stdout.splitlines()) if '"type":"result"' in line)
        return Turn(result["session_id"], self._new_requests(since), done.stdout)

    def session(self, cwd: Path, **env: str) -> Session:
        return ClaudeSession(self, cwd, env)

    def after_tool(self, request: Request) -> list[str]:
        # Claude Code 2.1.332 sends the context of the hooks that ran after a batch of tool calls as one system-role
        # message right after the user message carrying the tool results, one paragraph per hook, each opening with
        # "<Event>[:<tool>] hook additional context: ".
        messages = request.body["messages"]
        last = max(i for i, m in enumerate(messages) if _has_tool_result(m))
        return _claude_contexts(messages[last + 1 :], "PostToolBatch")

    def with_prompt(self, request: Request) -> list[str]:
        # …and a UserPromptSubmit hook's context as a system-role message right after the prompt it ran for.
        messages = request.body["messages"]
        last = max(i for i, m in enumerate(messages) if m["role"] == "user" and not _has_tool_result(m))
        return _claude_contexts(messages[last + 1 :], "UserPromptSubmit")

    def continuation(self, request: Request) -> str | None:
        # A Stop hook's additionalContext continues the turn with a user-role message of its own: a
        # <system-reminder> opening with "Stop hook additional context: ".
        last = request.body["messages"][-1]
        text = _claude_text(last)
        prefix = "<system-reminder>\nStop hook additional context: "
        if last["role"] != "user" or not text.startswith(prefix):
            return None
        return text.removeprefix(prefix).removesuffix("\n</system-reminder>")

    def delivered(self, request: Request, *, first: bool = True) -> list[str]:
        # Claude Code 2.1.332 sends hook context as "SessionStart hook additional context: …" in a system-role message
        # of the conversation, never in the system prompt nor a user message. At a session start it opens the first
        # text block of the system message that follows the first user message (its own "# Environment" notes follow
        # a blank line). After a compaction it is a paragraph further down that same block. On a resume it is a new
        # system message after the resumed prompt, and only if it differs from a context already in the conversation.
        # Several hooks' contexts share one prefix, joined by a newline in the order the hooks finished.
        messages = request.body["messages"]
        assert CLAUDE_PREFIX not in json.dumps(request.body.get("system")), "hook context in the system prompt"
        found = []
        for index, message in enumerate(messages):
            blocks = message["content"] if isinstance(message["content"], list) else [{"text": message["content"]}]
            for number, block in enumerate(blocks):
                text = block.get("text") or ""
                if CLAUDE_PREFIX not in text:
                    continue
                assert message["role"] == "system" and number == 0, (index, message["role"], number)
                assert text.count(CLAUDE_PREFIX) == 1, text[:300]
                start = text.index(CLAUDE_PREFIX)
                assert start == 0 or text[start - 2 : start] == "\n\n", text[:300]
                if first:
                    assert (index, start, messages[0]["role"]) == (1, 0, "user"), (index, start)
                found.append(text[start + len(CLAUDE_PREFIX) :])  # the context, then the host's own paragraphs
        return found


class ClaudeCodePlugin(ClaudeCode):
    """Claude Code with this repository loaded as a plugin (--plugin-dir): no `gitmail install` at all."""

    name = "claude-plugin"

    def hook_env(self) -> dict[str, str]:
        return {"GITMAIL_COMMAND": f"'{ROOT}/hooks/gitmail'"}  # what the plugin's hooks name for the session to run

    def install(self) -> None:
        pass

    def uninstall(self) -> None:
        pass

    def args(self) -> list[str]:
        return [*super().args(), "--plugin-dir", str(ROOT)]


class ClaudeSession(Session):
    """`claude -p --input-format stream-json --output-format stream-json --verbose`, its standard input kept open."""

    def __init__(self, host: ClaudeCode, cwd: Path, env: dict[str, str]) -> None:
        self.host = host
        self.process = subprocess.Popen(
            [*host.args(), "-p", "--input-format", "stream-json"],
            cwd=cwd,
            env=host.world.env(**env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.out = Lines(self.process)

    def prompt(self, text: str) -> Turn:
        since = len(self.host.world.stub.requests)
        self._send(text)
        result = self.out.until(lambda m: m.get("type") == "result")
        assert not result.get("is_error"), result
        self.session_id = result["session_id"]
        return Turn(self.session_id, self.host._new_requests(since), "".join(self.out.seen))

    def compact(self) -> None:
        self._send("/compact")
        self.out.until(lambda m: m.get("type") == "result")

    def idle_turn(self, since: int, timeout: float) -> Turn | None:
        """A turn the host began on its own while the session waited for its user (woken), once it has ended; None
        if none began within `timeout` seconds."""
        if self.host.world.stub.next_request(since, timeout) is None:
            return None
        result = self.out.until(lambda m: m.get("type") == "result")
        return Turn(result["session_id"], self.host._new_requests(since), "".join(self.out.seen))

    def _send(self, text: str) -> None:
        self._write({"type": "user", "message": {"role": "user", "content": text}})


# -- Codex ----------------------------------------------------------------------------------------------------------


class Codex(Host):
    """Codex with gitmail's hooks installed in $CODEX_HOME/hooks.json by `gitmail install --codex` (which trusts
    them)."""

    name = "codex"
    host = "codex"

    @property
    def settings(self) -> Path:
        return self.world.codex_home / "hooks.json"

    def install(self) -> None:
        self.world.gitmail("install", "--codex")

    def add_own_hook(self, name: str, *, context: str) -> None:
        """…and trust it as the user would in Codex's /hooks review (recorded through Codex's app-server)."""
        super().add_own_hook(name, context=context)
        listed = [h for h in codex_trust.list_hooks(self.world.root, codex=str(self.binary), env=self.world.env())]
        mine = {h.key: h.current_hash for h in listed if h.command.endswith(name)}
        assert len(mine) == 1, listed
        codex_trust.trust(mine, self.world.root, codex=str(self.binary), env=self.world.env())

    def uninstall(self) -> None:
        self.world.gitmail("uninstall", "--codex")

    def run(self, cwd: Path, prompt: str, *, resume: str | None = None, fork: bool = False) -> Turn:
        assert not fork, "codex exec has no fork"
        since = len(self.world.stub.requests)
        command = [str(self.binary), "exec", "--json"] + (["resume", resume] if resume else []) + [prompt]
        done = self._turn(command, cwd)
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        thread = next(e["thread_id"] for e in events if e.get("type") == "thread.started")
        return Turn(thread, self._new_requests(since), done.stdout + done.stderr)

    def session(self, cwd: Path, **env: str) -> Session:
        return CodexSession(self, cwd, env)

    def after_tool(self, request: Request) -> list[str]:
        # Codex 0.171.0 sends a PostToolUse hook's context as a developer message of its own between the tool call
        # and its output.
        items = request.body["input"]
        output = max(i for i, item in enumerate(items) if str(item.get("type", "")).endswith("call_output"))
        call = max(i for i, item in enumerate(items[:output]) if str(item.get("type", "")).endswith("call"))
        between = items[call + 1 : output]
        assert all(item.get("role") == "developer" for item in between), between
        return [_codex_text(item) for item in between]

    def with_prompt(self, request: Request) -> list[str]:
        # …and a UserPromptSubmit hook's context as a developer message right after the prompt.
        items = request.body["input"]
        prompt = max(i for i, item in enumerate(items) if item.get("role") == "user")
        after = items[prompt + 1 :]
        return [_codex_text(item) for item in after if item.get("role") == "developer"]

    def continuation(self, request: Request) -> str | None:
        # A Stop hook's {"decision": "block", "reason": R} continues the turn with a user-role message
        # <hook_prompt hook_run_id="stop:…">R</hook_prompt>.
        last = request.body["input"][-1]
        text = _codex_text(last)
        if last.get("role") != "user" or not text.startswith('<hook_prompt hook_run_id="stop:'):
            return None
        return text[text.index(">") + 1 :].removesuffix("</hook_prompt>")

    def delivered(self, request: Request, *, first: bool = True) -> list[str]:
        # Codex 0.171.0 sends a SessionStart hook's context as a developer message of its own right before the prompt
        # it ran for: at a session start between the <environment_context> user message and the prompt, on `exec
        # resume` after the earlier turns, after a compaction after the summary. Earlier contexts stay in the history.
        # Several hooks give several developer messages, in the order of the hooks file.
        items = request.body["input"]
        found = []
        for index, item in enumerate(items):
            if item.get("role") != "user":
                continue
            start = index
            while start > 0 and items[start - 1].get("role") == "developer":
                start -= 1
            if start > 0:  # the developer messages opening the input are Codex's own instructions
                found += [_codex_text(context) for context in items[start:index]]
        if first:
            prompts = [_codex_text(item) for item in items if item.get("role") == "user"]
            assert len(prompts) == 2 and prompts[0].startswith("<environment_context>"), prompts
        return found


def _claude_text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(block.get("text") or "" for block in content)


def _has_tool_result(message: dict[str, Any]) -> bool:
    content = message["content"]
    return isinstance(content, list) and any(block.get("type") == "tool_result" for block in content)


def _claude_contexts(following: list[dict[str, Any]], event: str) -> list[str]:
    """The contexts of `event`'s hooks in the system message that must follow (its paragraphs, by prefix)."""
    if not following:
        return []
    assert following[0]["role"] == "system", following[0]
    prefix = f"{event} hook additional context: "
    paragraphs = re.split(r"\n\n(?=\S+ hook additional context: )", _claude_text(following[0]))
    return [p.removeprefix(prefix) for p in paragraphs if p.startswith(prefix)]


def _codex_text(item: dict[str, Any]) -> str:
    content = item.get("content") or []
    return "".join(part.get("text", "") for part in content) if isinstance(content, list) else ""


class CodexSession(Session):
    """A Codex thread driven through `codex app-server` (the protocol Codex's own interfaces use): one thread, a
    turn per prompt."""

    def __init__(self, host: Codex, cwd: Path, env: dict[str, str]) -> None:
        self.host = host
        self.process = subprocess.Popen(
            [str(host.binary), "app-server"],
            cwd=cwd,
            env=host.world.env(**env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.out = Lines(self.process)
        self.ids = iter(range(1, 1_000_000))
        self.request("initialize", {"clientInfo": {"name": "gitmail-tests", "version": "0"}})
        self._write({"method": "initialized"})
        self.session_id = self.request("thread/start", {"cwd": str(cwd)})["thread"]["id"]

    def request(self, method: str, params: dict[str, Any]) -> Any:
        number = next(self.ids)
        self._write({"id": number, "method": method, "params": params})
        answer = self.out.until(lambda m: m.get("id") == number and "method" not in m)
        assert "error" not in answer, answer
        return answer["result"]

    def prompt(self, text: str) -> Turn:
        since = len(self.host.world.stub.requests)
        params = {"threadId": self.session_id, "input": [{"type": "text", "text": text}]}
        turn = self.request("turn/start", params)["turn"]["id"]
        self.out.until(lambda m: m.get("method") == "turn/completed" and m["params"]["turn"]["id"] == turn)
        return Turn(self.session_id, self.host._new_requests(since), "".join(self.out.seen))

    def compact(self) -> None:
        self.request("thread/compact/start", {"threadId": self.session_id})
        self.out.until(lambda m: m.get("method") == "turn/completed")


class CodexWindow:
    """Codex's interactive terminal interface (its TUI), as a user runs it in a terminal: in a tmux pane of a tmux
    server of its own. The TUI keeps its threads in Codex's managed app-server daemon, which runs the hooks and
    outlives the window; `close` ends both and whatever else of Codex's the world left running."""

    def __init__(self, world: World, cwd: Path) -> None:
        self.world, self.cwd = world, cwd
        self.server = f"gitmail-{os.getpid()}-{next(_probes)}"
        config = world.codex_home / "config.toml"
        trusted = f'\n[projects."{cwd}"]\ntrust_level = "trusted"\n'  # no "trust this folder?" question
        if trusted not in config.read_text():
            config.write_text(config.read_text() + trusted)
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in world.env(TERM="xterm-256color").items())
        launcher = world.root / f"{self.server}.sh"
        launcher.write_text(
            f"#!/bin/sh\n{exports}cd {shlex.quote(str(cwd))}\nexec {shlex.quote(str(world.binaries['codex']))}\n"
        )
        launcher.chmod(0o755)
        self._tmux("new-session", "-d", "-s", "codex", "-x", "160", "-y", "45", str(launcher))
        self._tmux("set-option", "-t", "codex", "remain-on-exit", "on")
        self.wait_screen("Ask Codex")
        control = world.codex_home / "app-server-control" / "app-server-control.sock"
        deadline = time.monotonic() + 30
        while not control.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the TUI drops keys until it has attached to the daemon

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.server, *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "codex")

    def wait_screen(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never showed in the Codex window:\n{self.screen()}")

    def prompt(self, text: str) -> Request:
        """Type a prompt and press Enter (again, until the turn starts): the turn's first model request."""
        since = len(self.world.stub.requests)
        self._tmux("send-keys", "-t", "codex", "-l", text)
        deadline = time.monotonic() + TURN_TIMEOUT
        while time.monotonic() < deadline:
            time.sleep(0.4)
            self._tmux("send-keys", "-t", "codex", "Enter")
            found = self.world.stub.next_request(since, 2.5)
            if found is not None:
                return found
        raise AssertionError(f"the Codex window did not start a turn:\n{self.screen()}")

    def quit(self) -> None:
        """Leave as a user does: /quit (the daemon keeps the thread loaded for about a minute)."""
        self._tmux("send-keys", "-t", "codex", "-l", "/quit")
        time.sleep(0.4)
        self._tmux("send-keys", "-t", "codex", "Enter")
        deadline = time.monotonic() + 30
        while "Pane is dead" not in self.screen() and time.monotonic() < deadline:
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.server, "kill-server"], capture_output=True)
        env = self.world.env()
        subprocess.run([str(self.world.binaries["codex"]), "app-server", "daemon", "stop"], env=env, capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
        for proc in Path("/proc").iterdir():  # the daemon's helpers survive `daemon stop`
            try:
                environ = (proc / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"CODEX_HOME={self.world.codex_home}".encode() in environ and proc.name.isdigit():
                try:
                    os.kill(int(proc.name), 15)
                except OSError:
                    pass
        shutil.rmtree(self.world.codex_home / "packages", ignore_errors=True)  # the daemon's copy of Codex (~0.4 GB)
        # The TUI asks GitHub for its announcement tip at every start, and no setting stops it: the stub refused it,
        # as it refuses anything but itself; that one request is not held against the test.
        refused = self.world.stub.refused
        refused[:] = [r for r in refused if r != "CONNECT raw.githubusercontent.com:443"]

    def __enter__(self) -> CodexWindow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


HOSTS: dict[str, type[Host]] = {"claude": ClaudeCode, "claude-plugin": ClaudeCodePlugin, "codex": Codex}


def done_command(request: Request, host: Host) -> str:
    """The command the framing's `Done:` line hands the session, read from the hook context the model received."""
    for context in host.delivered(request):
        for line in context.splitlines():
            if line.startswith("Done:"):
                return line.removeprefix("Done:").strip()
    raise AssertionError("the session was handed no Done: line")
