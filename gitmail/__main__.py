"""`gitmail` and `python -m gitmail`. Hook calls are routed before the command-line library is imported: they run
at every session start and must stay lean."""

import sys


def main() -> int:
    args = sys.argv[1:]
    if args[:1] == ["hook"]:
        from gitmail.hooks import main as hook_main

        return hook_main(args[1:])
    if args[:1] == ["sync"]:  # lean too: a sync that finds nothing new should cost little more than a fetch
        from gitmail.sync.command import main as sync_main

        code = sync_main(args[1:])
        if code is not None:
            return code
    from gitmail.cli.app import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
