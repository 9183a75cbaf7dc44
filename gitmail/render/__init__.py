"""Text for sessions and for people: the framing that delivers mail into a session, a message's card, listings,
confirmations, JSON. Pure.

Each job is a module of its own: `frames` (the framing), `cards` (one message), `senders`, `user_claims`, `states`,
`listings`, `confirmations`, `lease_lines`, `signing_keys`, `times`, `words`. Every name they share is also
`gitmail.render.<name>`, loaded on first use, so a process that frames mail does not import what lists leases.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitmail.render.cards import PLAIN as PLAIN
    from gitmail.render.cards import Voice as Voice
    from gitmail.render.cards import attachment_lines as attachment_lines
    from gitmail.render.cards import card as card
    from gitmail.render.cards import quote_body as quote_body
    from gitmail.render.confirmations import described as described
    from gitmail.render.confirmations import done as done
    from gitmail.render.confirmations import retracted as retracted
    from gitmail.render.confirmations import sent as sent
    from gitmail.render.frames import BUDGET as BUDGET
    from gitmail.render.frames import HOST_LIMIT as HOST_LIMIT
    from gitmail.render.frames import MARGIN as MARGIN
    from gitmail.render.frames import UNREADABLE_LISTED as UNREADABLE_LISTED
    from gitmail.render.frames import Selection as Selection
    from gitmail.render.frames import framing as framing
    from gitmail.render.frames import in_order as in_order
    from gitmail.render.frames import notice as notice
    from gitmail.render.frames import select as select
    from gitmail.render.frames import unreadable as unreadable
    from gitmail.render.frames import unrecorded as unrecorded
    from gitmail.render.lease_lines import lease_holder as lease_holder
    from gitmail.render.lease_lines import lease_json as lease_json
    from gitmail.render.lease_lines import lease_line as lease_line
    from gitmail.render.lease_lines import lease_refusal as lease_refusal
    from gitmail.render.lease_lines import leased as leased
    from gitmail.render.lease_lines import leases_held as leases_held
    from gitmail.render.listings import as_json as as_json
    from gitmail.render.listings import log_line as log_line
    from gitmail.render.listings import session_json as session_json
    from gitmail.render.listings import session_line as session_line
    from gitmail.render.senders import PERSON_LABEL as PERSON_LABEL
    from gitmail.render.senders import machine_name as machine_name
    from gitmail.render.senders import origin as origin
    from gitmail.render.senders import trust as trust
    from gitmail.render.senders import vouched as vouched
    from gitmail.render.signing_keys import key_lines as key_lines
    from gitmail.render.signing_keys import own_key as own_key
    from gitmail.render.signing_keys import own_key_line as own_key_line
    from gitmail.render.states import standing as standing
    from gitmail.render.times import until as until
    from gitmail.render.times import when as when
    from gitmail.render.times import when_epoch as when_epoch
    from gitmail.render.user_claims import CLAIM as CLAIM
    from gitmail.render.user_claims import speaks_for_the_user as speaks_for_the_user
    from gitmail.render.words import count as count
    from gitmail.render.words import dumps as dumps
    from gitmail.render.words import quote as quote
    from gitmail.render.words import size as size
    from gitmail.render.words import visible as visible

_HOME = {  # each shared name -> the module that owns it
    "attachment_lines": "cards",
    "card": "cards",
    "PLAIN": "cards",
    "quote_body": "cards",
    "Voice": "cards",
    "CLAIM": "user_claims",
    "speaks_for_the_user": "user_claims",
    "described": "confirmations",
    "done": "confirmations",
    "retracted": "confirmations",
    "sent": "confirmations",
    "BUDGET": "frames",
    "framing": "frames",
    "HOST_LIMIT": "frames",
    "in_order": "frames",
    "MARGIN": "frames",
    "notice": "frames",
    "select": "frames",
    "Selection": "frames",
    "unreadable": "frames",
    "UNREADABLE_LISTED": "frames",
    "unrecorded": "frames",
    "lease_holder": "lease_lines",
    "lease_json": "lease_lines",
    "lease_line": "lease_lines",
    "lease_refusal": "lease_lines",
    "leased": "lease_lines",
    "leases_held": "lease_lines",
    "as_json": "listings",
    "log_line": "listings",
    "session_json": "listings",
    "session_line": "listings",
    "machine_name": "senders",
    "origin": "senders",
    "PERSON_LABEL": "senders",
    "trust": "senders",
    "vouched": "senders",
    "key_lines": "signing_keys",
    "own_key": "signing_keys",
    "own_key_line": "signing_keys",
    "standing": "states",
    "until": "times",
    "when": "times",
    "when_epoch": "times",
    "count": "words",
    "dumps": "words",
    "quote": "words",
    "size": "words",
    "visible": "words",
}


def __getattr__(name: str) -> object:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # found once: later uses do not come back here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])
