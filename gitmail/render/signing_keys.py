"""Signing keys as `gitmail keys` lists them and `keys init` / `keys use` confirm them."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitmail.store.keys import Survey
    from gitmail.values.verdict import Key


def key_lines(survey: Survey) -> list[str]:
    """`gitmail keys`: a line per key, tab-separated: machine name, id, fingerprint, what this machine makes of it."""
    lines = [own_key_line(survey)]
    for key in sorted(survey.others, key=lambda k: (k.name, k.machine, k.at)):
        lines.append(f"{key.name}\t{key.machine}\t{key.fingerprint}\t{_key_state(key)}")
    return lines


def own_key_line(survey: Survey) -> str:
    here = survey.machine
    if survey.own is None:
        made = "made at the first write, or `gitmail keys init`"
        return f"{here.name}\t{here.id or '-'}\t-\tthis machine: no key yet ({made})"
    which = "gitmail's own key" if survey.own.own else f"your key {survey.own.path}"
    published = "published" if survey.published else "not published yet (at the next write)"
    return f"{here.name}\t{here.id}\t{survey.own.fingerprint}\tthis machine: {which}, {published}"


def own_key(survey: Survey) -> str:
    """What `keys init` and `keys use` say."""
    if survey.own is None:
        return "this machine has no signing key"
    which = "gitmail's own key" if survey.own.own else str(survey.own.path)
    return (
        f"this machine ({survey.machine.name}, {survey.machine.id}) signs with {survey.own.kind} key "
        f"{survey.own.fingerprint} ({which})" + (", published" if survey.published else "")
    )


def _key_state(key: Key) -> str:
    from gitmail.values.verdict import NEW, PINNED, REVOKED, TRUSTED

    since = key.at[:10]
    return {
        PINNED: f"pinned on first sight {since}",
        TRUSTED: f"trusted {since}",
        REVOKED: f"revoked {since}: its mail reads UNVERIFIED",
        NEW: f"NEW KEY, not accepted: `gitmail keys trust {key.machine} {key.fingerprint}` if you expect it, else "
        f"`gitmail keys revoke {key.machine}`",
    }.get(key.state, key.state)
