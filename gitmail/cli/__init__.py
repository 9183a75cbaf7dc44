"""The command line: the typer app (app.py) gathering its commands by group (mail_commands.py, wings.py,
sync_commands.py, key_commands.py, on what options.py shares), which translate arguments into calls of the action
layer and its results into text (the mail commands through commands.py); the lean path that answers the commonest
commands before typer is imported (plain.py); and `gitmail sync`, which runs without typer (sync.py)."""
