"""The date and time classes, taken from CPython's C module where there is one: on Python 3.11 `import datetime`
first runs the module's whole pure-Python twin (a millisecond or two of every session start, `inbox` and `log`)
and only then replaces its classes with these same C ones. The classes are the same objects either way
(`datetime.datetime is _datetime.datetime`), so values made here compare, hash and pickle as the stdlib's."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import UTC, datetime, timedelta, timezone
else:
    try:
        from _datetime import UTC, datetime, timedelta, timezone
    except ImportError:  # an interpreter without the C module
        from datetime import UTC, datetime, timedelta, timezone

__all__ = ["UTC", "datetime", "timedelta", "timezone"]
