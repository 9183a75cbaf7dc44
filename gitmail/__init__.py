"""gitmail: a private, git-backed mailbox between AI coding sessions in different repositories."""

__version__ = "0.1.0"
