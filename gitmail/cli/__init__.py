"""The command line: typer commands (app.py) that translate arguments into calls of the action layer and its
results into text (commands.py), the lean path that answers the commonest commands before typer is imported
(quick.py), and `gitmail sync`, which runs without typer (sync.py)."""
