"""A host session as the tests drive it: each call is one hook run as the host makes it, in process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from gitmail import hooks
from tests.conftest import run_gitmail


class Session:
    """One Claude Code session: each call is one hook run as the host makes it; `gitmail` runs a command in it."""

    def __init__(self, cwd: Path, session_id: str, host: str = "claude") -> None:
        self.cwd, self.id, self.host = cwd, session_id, host

    def __call__(self, moment: str, **extra: Any) -> str:
        payload = {"session_id": self.id, "cwd": str(self.cwd), **extra}
        answer = hooks.run(moment, self.host, json.dumps(payload), watch=True)
        if answer.after is not None:
            answer.after()
        if answer.stdout is None:
            return answer.stderr or ""
        return str(answer.stdout.get("hookSpecificOutput", {}).get("additionalContext", ""))

    def gitmail(self, *args: str) -> subprocess.CompletedProcess[str]:
        variable = "CLAUDE_CODE_SESSION_ID" if self.host == "claude" else "CODEX_THREAD_ID"
        return run_gitmail(*args, cwd=self.cwd, env={variable: self.id})

    def send(self, *args: str) -> str:
        done = self.gitmail("send", *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()
