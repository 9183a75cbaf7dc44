"""gitmail's entries in the `hooks` object of a host's JSON settings (Claude Code's settings.json and Codex's
hooks.json have the same shape: event -> groups -> handlers): the change that makes them exactly what is wanted, and
where each handler it moves goes, since Codex's trust follows a handler's position.

Each of gitmail's entries lives in a group of its own with no matcher, so it runs for every source and every tool,
including ones hosts add later. The change is made in the text itself (through `jsonedit`), so every unrelated key,
hook and formatting choice stays byte for byte; the settings as they should be are computed as data first, and the
in-place edit is used only if it reads back as exactly that. A second install changes no byte, and containers an
uninstall empties go, while an empty one the user had stays.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from gitmail.errors import GitmailError
from gitmail.install import jsonedit
from gitmail.install.hook_commands import is_ours
from gitmail.install.settings import Change, dump_json, gitmail_made, load_json, read

if TYPE_CHECKING:
    from pathlib import Path

Position = tuple[str, int, int]  # (event as the settings name it, group, handler)
Moves = dict[Position, Position | None]  # where each handler went; None: removed


def planned(path: Path, wanted: dict[str, dict[str, Any]]) -> tuple[Change | None, Moves]:
    """The change to one settings file (gitmail's entries made exactly `wanted`: host event -> entry), and where
    each handler it moves goes."""
    before = read(path)
    if before is None and not wanted:
        return None, {}
    data = load_json(path, before)
    after_data = _with_hooks(json.loads(json.dumps(data)), wanted, path)
    moves = _moves(data, after_data)
    if after_data == data:
        return (Change(path, before, before) if before is not None else None), moves
    if not after_data and gitmail_made(path):
        return Change(path, before, None), moves  # gitmail made this file: uninstall removes it
    after = _edited(before, wanted) if before and before.strip() else None
    if after is None or json.loads(after) != after_data:  # the in-place edit is a courtesy; correctness comes first
        after = dump_json(after_data, before)
    return Change(path, before, after), moves


def places(document: dict[str, Any]) -> list[tuple[Position, object]]:
    """Every handler with its (event, group, handler) position."""
    hooks = document.get("hooks")
    if not isinstance(hooks, dict):
        return []
    return [
        ((event, g, e), entry)
        for event, groups in hooks.items()
        if isinstance(groups, list)
        for g, group in enumerate(groups)
        for e, entry in enumerate(group.get("hooks", []) if isinstance(group, dict) else [])
    ]


def ours(document: dict[str, Any]) -> list[tuple[Position, dict[str, Any]]]:
    """gitmail's handlers, with their positions."""
    return [(place, entry) for place, entry in places(document) if isinstance(entry, dict) and is_ours(entry)]


def handler_at(document: dict[str, Any], place: Position) -> tuple[dict[str, Any], str | None]:
    """The handler at this position, and the matcher of its group."""
    event, group, handler = place
    found = document["hooks"][event][group]
    return found["hooks"][handler], found.get("matcher")


def _events(hooks: object, wanted: dict[str, Any]) -> list[str]:
    """The events to look at: those that hold a gitmail entry now, then those that are to."""
    present = {e: groups for e, groups in hooks.items() if isinstance(groups, list)} if isinstance(hooks, dict) else {}
    found = [e for e, groups in present.items() if e in wanted or any(_has_ours(g) for g in groups)]
    return found + [e for e in wanted if e not in present]


def _with_hooks(data: dict[str, Any], wanted: dict[str, dict[str, Any]], path: Path) -> dict[str, Any]:
    """The settings as they should be: the model the in-place edit must match."""
    had_hooks = "hooks" in data
    hooks = _child(data, "hooks", {}, path)
    removed_any = False
    for event in _events(hooks, wanted):
        had = event in hooks
        groups = _child(hooks, event, [], path)
        kept = _kept_group(groups) if event in wanted else None
        removed = False
        for index, group in reversed(list(enumerate(groups))):
            if index == kept or not _has_ours(group):
                continue
            group["hooks"] = [e for e in group["hooks"] if not is_ours(e)]
            removed = True
            if not group["hooks"]:
                del groups[index]
        if kept is not None:
            groups[kept] = _group(wanted[event])
        elif event in wanted:
            groups.append(_group(wanted[event]))
        # Containers this edit emptied, or only just made, go; an empty one the user had stays.
        if not groups and (removed or not had):
            del hooks[event]
        removed_any = removed_any or removed
    if not hooks and (removed_any or not had_hooks):
        del data["hooks"]
    return data


def _edited(text: str, wanted: dict[str, dict[str, Any]]) -> str:
    """The same change made in the text itself, so every other byte of the user's file stays as it was."""
    for event in _events(json.loads(text).get("hooks"), wanted):
        text = _edited_event(text, event, wanted.get(event))
    return text


def _edited_event(text: str, event: str, entry: dict[str, Any] | None) -> str:
    groups_node = _event_node(text, event)
    groups = groups_node.value(text) if groups_node is not None else []
    kept = _kept_group(groups) if entry is not None else None
    if kept is not None and entry is not None and groups[kept] != _group(entry):
        assert groups_node is not None
        text = jsonedit.replace(text, groups_node.items[kept], _group(entry))
    for group, handler in reversed(_our_places_in(text, event)):  # last first, so earlier positions stay valid
        if group == kept:
            continue
        groups_node = _event_node(text, event)
        assert groups_node is not None
        handlers = groups_node.items[group].get("hooks")
        assert handlers is not None
        if len(handlers.items) > 1:
            text = jsonedit.remove(text, handlers, handler)
            continue
        text = jsonedit.remove(text, groups_node, group)
        if entry is None and not _event_node(text, event).items:  # type: ignore[union-attr]  # prune what it emptied
            hooks = jsonedit.parse(text).get("hooks")
            assert hooks is not None
            text = jsonedit.remove_member(text, hooks, event)
            root = jsonedit.parse(text)
            hooks = root.get("hooks")
            if hooks is not None and not hooks.members:
                text = jsonedit.remove_member(text, root, "hooks")
    if entry is not None and kept is None:
        root = jsonedit.parse(text)
        hooks_node = root.get("hooks")
        if hooks_node is None:
            return jsonedit.add_member(text, root, "hooks", {event: [_group(entry)]})
        groups_node = hooks_node.get(event)
        if groups_node is None:
            return jsonedit.add_member(text, hooks_node, event, [_group(entry)])
        return jsonedit.append_item(text, groups_node, _group(entry))
    return text


def _kept_group(groups: list[Any]) -> int | None:
    """The first group holding only gitmail's entries: gitmail's own, updated where it stands. An entry of ours
    in a group shared with other hooks is taken out of it instead, since that group's matcher is not ours."""
    return next(
        (i for i, g in enumerate(groups) if _has_ours(g) and all(is_ours(e) for e in g["hooks"])),
        None,
    )


def _has_ours(group: object) -> bool:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(handlers, list) and any(is_ours(e) for e in handlers)


def _event_node(text: str, event: str) -> jsonedit.Node | None:
    hooks = jsonedit.parse(text).get("hooks")
    return hooks.get(event) if hooks else None


def _our_places_in(text: str, event: str) -> list[tuple[int, int]]:
    """(group, handler) positions of gitmail's entries under this event."""
    return [(g, h) for (e, g, h), entry in places(json.loads(text)) if e == event and is_ours(entry)]


def _moves(before: dict[str, Any], after: dict[str, Any]) -> Moves:
    """Where each handler of `before` stands in `after`. Under each event, others' handlers keep their order, so
    they pair up in turn; gitmail's keep their position only if updated where they stood."""
    old, new = places(before), places(after)
    moves: Moves = {}
    for event in dict.fromkeys(p[0] for p, _ in old):
        theirs_before = [p for p, e in old if p[0] == event and not is_ours(e)]
        theirs_after = [p for p, e in new if p[0] == event and not is_ours(e)]
        moves.update(zip(theirs_before, theirs_after, strict=True))
    ours_now = {p for p, e in new if is_ours(e)}
    for position, entry in old:
        if is_ours(entry):
            moves[position] = position if position in ours_now else None
    return moves


def _group(entry: dict[str, Any]) -> dict[str, Any]:
    return {"hooks": [entry]}


def _child(parent: dict[str, Any], key: str, default: Any, path: Path) -> Any:
    value = parent.setdefault(key, default)
    if type(value) is not type(default):
        raise GitmailError(f"{path}: '{key}' is not a {type(default).__name__}; fix it or move the file away")
    return value
