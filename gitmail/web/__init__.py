"""`gitmail view`: the local web page of every repository's conversations: its read model, HTTP server and
templates."""
