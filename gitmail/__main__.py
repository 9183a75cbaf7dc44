"""`gitmail` and `python -m gitmail`: the process's entry, which routes to an adapter before the command-line
library is imported. The hooks run at every session start and must stay lean; a sync that finds nothing new should
cost little more than a fetch; an MCP client waits for the server's first answer before it offers its tools. Every
route ends through the one error edge (edge.py)."""

import sys


def main() -> int:
    args = sys.argv[1:]
    if args[:1] == ["hook"]:
        from gitmail.hooks import main as hook_main

        return hook_main(args[1:])
    if args[:1] == ["guard"]:  # the commit guard's pre-commit hook
        from gitmail.commit_guard import main as guard_main

        return guard_main(args[1:])
    if args == ["mcp"]:  # the MCP server: its client waits for its first answer
        from gitmail.mcp.server import main as mcp_main

        return mcp_main()
    if args[:1] == ["sync"]:
        from gitmail.cli.sync import main as sync_main

        code = sync_main(args[1:])
        if code is not None:
            return code
    from gitmail.cli import plain

    if args[:1] and args[0] in plain.COMMANDS:  # plain forms without the CLI library
        code = plain.main(args)
        if code is not None:
            return code
    from gitmail.cli.app import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
