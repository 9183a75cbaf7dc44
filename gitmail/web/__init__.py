"""`gitmail view`: the local web page of every repository's conversations: what it reads of the mailbox
(snapshot.py), what each page shows of that (pages.py), the HTTP server and export (server.py) and templates."""
