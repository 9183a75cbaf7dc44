"""The mailbox on disk: a private bare git repository and gitmail's own files beside its refs. Everything here is
I/O on the mailbox; nothing here knows about sessions' delivery, hosts or commands. Import the modules themselves:
this package's own import stays empty, so the hooks pay only for what they use."""
