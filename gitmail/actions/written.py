"""What follows every write of mail, whichever verb made it: the sending repository's claim on its name, a sync
with remotes that sync by themselves, and, where mail arrived for someone, the waking of idle sessions it is for
and a notification where the person is needed (notify.py).
Each verb calls `after_writing` once its own write is durable; none of it ever fails the verb."""

from __future__ import annotations

from gitmail import arrivals
from gitmail.store.claims import claim
from gitmail.values.names import PERSON
from gitmail.values.urgency import NOW

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from gitmail.store.repository import Store
    from gitmail.values.mail import Entry
    from gitmail.workspace import Actor

EVERYONE = None  # `arrived`: mail for every repository (a broadcast, or what a sync brought in)


def after_writing(box: Store, actor: Actor | None, *, arrived: Iterable[Entry] | None = ()) -> None:
    """After a write by `actor` (None: nobody in particular, as a sync): its claim, a background sync, and the
    waking of idle sessions for the mail that `arrived` (EVERYONE: for every repository)."""
    if actor is not None and actor.here is not None:
        claim(box, repo=actor.repo, path=actor.here)
    from gitmail.sync import background

    background.after_send(box)
    if arrived is EVERYONE:
        arrivals.prepare_starts(box, None)
        arrivals.after_arrival(box, None)
        return
    entries = list(arrived)
    if any(e.message.to == PERSON or e.message.urgency == NOW for e in entries):  # else no module more is loaded
        from gitmail import notify

        notify.after_write(box, entries)
    changed = {e.message.to for e in entries if not e.message.is_broadcast}
    arrivals.prepare_starts(box, [*changed, *([str(actor.repo)] if actor is not None else [])])
    if any(e.message.is_broadcast for e in entries):
        arrivals.after_arrival(box, None)
    elif entries:
        arrivals.after_arrival(box, sorted(changed))
