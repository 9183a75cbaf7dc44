"""A `packed-refs` holding a line that is no ref: git stops on it for every ref it looks up. `gitmail doctor` reports
it (the rest of its report too) with `--repair` as the fix, `--repair` mends it, and the commands git stops for say in
one line that the mailbox needs that repair."""

from __future__ import annotations

import json
from pathlib import Path

from gitmail import mailbox
from gitmail.store.repository import Store
from tests.conftest import CliRunner
from tests.damage import fsck, git

NEEDS_REPAIR = (
    "gitmail: error: the mailbox needs `gitmail doctor --repair`: its packed-refs holds a line that is no ref "
    '("garbage"), and git stops on it\n'
)


def test_a_garbage_line_is_reported_send_and_log_name_the_repair_and_the_repair_mends_it(
    cli: CliRunner, box: Store, api: Path, web: Path
) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="kept")
    assert cli("inbox", cwd=web).code == 0
    git(box, "pack-refs", "--all")
    packed = box.path / "packed-refs"
    lines = packed.read_text().splitlines()
    packed.write_text("\n".join([*lines, "garbage"]) + "\n")  # no space: nothing git could take for a ref

    found = cli("doctor", cwd=web)
    assert (found.code, found.err) == (1, ""), found
    assert (
        f"problem   refs: {packed} has 1 line that is not a ref, so git stops on it and nothing can be written: "
        f'line {len(lines) + 1} ("garbage") -- fix: gitmail doctor --repair keeps a copy in '
        f"{box.own_dir / 'damaged-refs'} and leaves those lines out"
    ) in found.out.splitlines()
    assert "note      keys: not checked: git cannot read the refs until packed-refs is mended" in found.out
    assert found.out.endswith("1 problem found.\n")
    assert json.loads(cli("doctor", "--json", cwd=web).out)["healthy"] is False

    for command in (["send", "--to", "web", "-s", "stuck"], ["log"]):
        stuck = cli(*command, cwd=api)
        assert (stuck.code, stuck.out, stuck.err) == (1, "", NEEDS_REPAIR), (command, stuck)

    repaired = cli("doctor", "--repair", cwd=web)
    assert repaired.code == 0, repaired
    assert "repaired  left 1 line git could not read out of packed-refs (kept whole as " in repaired.out
    assert "garbage" not in packed.read_text() and fsck(box).returncode == 0
    assert cli("send", "--to", "web", "-s", "after", cwd=api).code == 0
    log = cli("log", cwd=api)
    assert log.code == 0 and sent.message.id in log.out and "after" in log.out, log
