"""The one edge between gitmail and whoever started it: every entry point (the command line, the quick sync path,
the MCP server, the hooks) runs its work through here, so an error ends the same way wherever it happens.

- A failure the user can act on (GitmailError) is one `gitmail: error: …` line on standard error and its exit
  code (1 runtime, 2 usage).
- Ctrl-C is `gitmail: interrupted` and 130; a reader that went away (`gitmail log | head`) ends quietly.
- Anything else is a failure nobody foresaw: one `gitmail: internal error: …` line, exit 3, and its traceback in
  gitmail.log beside the mailbox (store/log.py, the one writer of it). No traceback reaches a user.
- A hook never fails its session: `contained` turns every failure into the hook's own quiet answer.
"""

from __future__ import annotations

import sys

from gitmail.errors import ExitCode, GitmailError
from gitmail.values.phrase import spoken

TYPE_CHECKING = False  # the typing module costs the quick paths an import; only the annotations need it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    from gitmail.values.phrase import Words

    T = TypeVar("T")


def say(text: str) -> None:
    """One line for the user, on standard error."""
    try:
        print(f"gitmail: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # standard error is gone too: nothing more to do
        pass


def run(work: Callable[[], int], *, where: str, words: Words | None = None) -> int:
    """Run an entry point's work; its exit code, whatever happens. `words`: how the entry point spells the action
    layer's options, in what an error says."""
    from gitmail.store.log import heard_by

    heard_by(lambda text: say(f"warning: {text}"))
    try:
        return work()
    except GitmailError as error:
        say(f"error: {said(error, words or {})}")
        return int(error.exit_code)
    except KeyboardInterrupt:
        say("interrupted")
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:  # `gitmail log | head`: the reader has what it wanted
        _silence_stdout()
        return int(ExitCode.OK)
    except Exception as error:  # a bug, or a failure nobody foresaw: one line here, the traceback in the log
        say(f"internal error: {unforeseen(error, where)} Please report it.")
        return int(ExitCode.INTERNAL)


def unforeseen(error: BaseException, where: str) -> str:
    """Log a failure nobody foresaw, with its traceback; the one line that says what it was and where the log is."""
    from gitmail.store.log import failure

    return failure(error, where)


def said(error: GitmailError, words: Words) -> str:
    """What an expected error says, its options in these words."""
    return spoken(error.args[0], words) if len(error.args) == 1 else str(error)


def described(error: Exception, where: str, words: Words | None = None) -> str:
    """One line for an error where a line is all that can be given back (a tool result): "error: …" for a failure
    the user can act on, "internal error: …" (and a log entry) for any other."""
    if isinstance(error, GitmailError):
        return f"error: {said(error, words or {})}"
    return f"internal error: {unforeseen(error, where)}"


def contained(work: Callable[[], T], *, where: str, fallback: Callable[[str], T]) -> T:
    """For a hook: whatever goes wrong, the log gets the details and the hook gets `fallback(one line)`."""
    try:
        return work()
    except Exception as error:
        return fallback(unforeseen(error, where))


def _silence_stdout() -> None:
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass
