"""values/dates.py: the stdlib's own date and time classes, taken without running datetime.py."""

from __future__ import annotations

import datetime as stdlib
import subprocess
import sys

from gitmail.values import dates


def test_the_classes_are_the_standard_librarys() -> None:
    assert dates.datetime is stdlib.datetime and dates.timedelta is stdlib.timedelta
    assert dates.timezone is stdlib.timezone and dates.UTC is stdlib.UTC
    moment = dates.datetime(2026, 1, 2, 3, 4, tzinfo=dates.UTC)
    assert moment == stdlib.datetime.fromisoformat("2026-01-02T03:04:00+00:00")


def test_taking_them_leaves_the_datetime_module_unloaded() -> None:
    probe = "import sys; from gitmail.values import dates; print('datetime' in sys.modules, dates.UTC)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout == "False UTC\n"
