"""The command line: the typer app (app.py) gathering its commands by group (mail.py, wings.py, remotes.py,
keys.py, on what options.py shares), which translate arguments into calls of the action layer and its results into
text (the mail commands through commands.py); the lean path that answers the commonest commands before typer is
imported (quick.py); and `gitmail sync`, which runs without typer (sync.py)."""
