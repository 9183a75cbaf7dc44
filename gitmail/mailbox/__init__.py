"""Mail in the mailbox: the operations over the store that the action layer composes into what users ask for. It
decides nothing about sessions or hosts. One module per job:

- composing.py: writing a message, a reply, a broadcast or a retraction;
- pending.py: what a repository has pending, and recording what was shown of it;
- archiving.py: marking done and reopening, and recording an applied patch;
- finding.py: one message by id, read and checked; whether a name is known;
- browsing.py: history;
- attached.py: a message's attachments;
- writes.py: what every write shares (the writer, receipts, the time).
"""

from gitmail.lazy import exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitmail.mailbox.archiving import done, record_applied, reopen
    from gitmail.mailbox.attached import attached_blob, attachment, attachment_content, write_attachment
    from gitmail.mailbox.browsing import log
    from gitmail.mailbox.composing import broadcast, reply, retract, send
    from gitmail.mailbox.finding import CANDIDATES_LISTED, known, resolve, show, vouched, with_receipts
    from gitmail.mailbox.pending import pending, record_shown
    from gitmail.mailbox.writes import local_machine_id, now

__all__ = [
    "CANDIDATES_LISTED",
    "attached_blob",
    "attachment",
    "attachment_content",
    "broadcast",
    "done",
    "known",
    "local_machine_id",
    "log",
    "now",
    "pending",
    "record_applied",
    "record_shown",
    "reopen",
    "reply",
    "resolve",
    "retract",
    "send",
    "show",
    "vouched",
    "with_receipts",
    "write_attachment",
]

__getattr__ = exports(
    __name__,
    {
        "CANDIDATES_LISTED": "gitmail.mailbox.finding",
        "attached_blob": "gitmail.mailbox.attached",
        "attachment": "gitmail.mailbox.attached",
        "attachment_content": "gitmail.mailbox.attached",
        "broadcast": "gitmail.mailbox.composing",
        "done": "gitmail.mailbox.archiving",
        "known": "gitmail.mailbox.finding",
        "local_machine_id": "gitmail.mailbox.writes",
        "log": "gitmail.mailbox.browsing",
        "now": "gitmail.mailbox.writes",
        "pending": "gitmail.mailbox.pending",
        "record_applied": "gitmail.mailbox.archiving",
        "record_shown": "gitmail.mailbox.pending",
        "reopen": "gitmail.mailbox.archiving",
        "reply": "gitmail.mailbox.composing",
        "resolve": "gitmail.mailbox.finding",
        "retract": "gitmail.mailbox.composing",
        "send": "gitmail.mailbox.composing",
        "show": "gitmail.mailbox.finding",
        "vouched": "gitmail.mailbox.finding",
        "with_receipts": "gitmail.mailbox.finding",
        "write_attachment": "gitmail.mailbox.attached",
    },
)
