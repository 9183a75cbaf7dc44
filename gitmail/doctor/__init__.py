"""`gitmail doctor`: everything that can stand between a repository and its mail, each finding with its remedy, and
the repairs that are safe to make. Pure of printing: the command line prints what `describe` writes.

- findings.py: what a finding is, and the tables (condition, text, remedy) the checks are written as;
- store_findings.py and key_findings.py: the mailbox, its refs, files and keys (the facts from store/integrity.py);
- environment.py: this repository, the hosts' hooks, waking, leases and the commit guard;
- report.py: the order of the checks, the repairs (store/repair.py) said in words, the text and JSON.
"""

from gitmail.doctor.findings import Finding, Level, Report
from gitmail.doctor.report import as_json, describe, examine, repair

__all__ = ["Finding", "Level", "Report", "as_json", "describe", "examine", "repair"]
