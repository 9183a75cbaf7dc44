"""Text for sessions and for people: the framing that delivers mail into a session, a message's card, listings,
confirmations, JSON. Pure.

Each job is a module of its own: `frames` (the framing), `cards` (one message), `senders`, `user_claims`, `states`,
`listings`, `confirmations`, `lease_lines`, `signing_keys`, `times`, `words`. Every name they share is also
`gitmail.render.<name>`, loaded on first use, so a process that frames mail does not import what lists leases.
"""

from __future__ import annotations

from gitmail.lazy import exports

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
    from gitmail.render.listings import peek_text as peek_text
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

__getattr__ = exports(
    __name__,
    {  # each shared name -> the module that owns it
        "attachment_lines": "gitmail.render.cards",
        "card": "gitmail.render.cards",
        "PLAIN": "gitmail.render.cards",
        "quote_body": "gitmail.render.cards",
        "Voice": "gitmail.render.cards",
        "CLAIM": "gitmail.render.user_claims",
        "speaks_for_the_user": "gitmail.render.user_claims",
        "described": "gitmail.render.confirmations",
        "done": "gitmail.render.confirmations",
        "retracted": "gitmail.render.confirmations",
        "sent": "gitmail.render.confirmations",
        "BUDGET": "gitmail.render.frames",
        "framing": "gitmail.render.frames",
        "HOST_LIMIT": "gitmail.render.frames",
        "in_order": "gitmail.render.frames",
        "MARGIN": "gitmail.render.frames",
        "notice": "gitmail.render.frames",
        "select": "gitmail.render.frames",
        "Selection": "gitmail.render.frames",
        "unreadable": "gitmail.render.frames",
        "UNREADABLE_LISTED": "gitmail.render.frames",
        "unrecorded": "gitmail.render.frames",
        "lease_holder": "gitmail.render.lease_lines",
        "lease_json": "gitmail.render.lease_lines",
        "lease_line": "gitmail.render.lease_lines",
        "lease_refusal": "gitmail.render.lease_lines",
        "leased": "gitmail.render.lease_lines",
        "leases_held": "gitmail.render.lease_lines",
        "as_json": "gitmail.render.listings",
        "log_line": "gitmail.render.listings",
        "peek_text": "gitmail.render.listings",
        "session_json": "gitmail.render.listings",
        "session_line": "gitmail.render.listings",
        "machine_name": "gitmail.render.senders",
        "origin": "gitmail.render.senders",
        "PERSON_LABEL": "gitmail.render.senders",
        "trust": "gitmail.render.senders",
        "vouched": "gitmail.render.senders",
        "key_lines": "gitmail.render.signing_keys",
        "own_key": "gitmail.render.signing_keys",
        "own_key_line": "gitmail.render.signing_keys",
        "standing": "gitmail.render.states",
        "until": "gitmail.render.times",
        "when": "gitmail.render.times",
        "when_epoch": "gitmail.render.times",
        "count": "gitmail.render.words",
        "dumps": "gitmail.render.words",
        "quote": "gitmail.render.words",
        "size": "gitmail.render.words",
        "visible": "gitmail.render.words",
    },
)
