"""Benchmark gitmail as its users meet it: whole processes, timed from start to exit.

Each row is the median and min of N timed runs, after 2 warm-up runs that are not counted. Rows measured at
several archive sizes give their ratio to the same row at 0 archived messages: gitmail's reads should not grow with
the archive. Each size has its own mailbox and the timed runs alternate between sizes, so a machine that gets busier
or quieter during the run shifts every size alike instead of skewing the ratios; the groups of rows compared side
by side (moments, peers, pending, sessions, signing) run interleaved in one run with `python3 -c pass`, and give their
ratios to it and to their counterparts. Every run must succeed, and every message sent must arrive pending, or the
benchmark stops with an error.

Everything happens in a temporary directory (HOME, the mailboxes and the session repositories), removed at the
end. Each mailbox is the next smaller one copied and grown with one `git fast-import`, then packed as gitmail packs
its own; the 20 pending messages in each are written by gitmail itself.

Where things are:
  - runner.py: timing whole processes, warm-ups, interleaving, medians, ratios in notes (`times`);
  - fixtures.py: the sandbox, mailboxes of N archived and 20 pending, the hooks as installed, hosts' payloads;
  - daemon.py: a real `git daemon` on 127.0.0.1 and a relay counting the bytes on the wire;
  - one module per group, each saying what it measures: reads, view, moments, peers, pending, sessions, send, mcp,
    concurrent, sync, signing, and attachments (its own command, scripts/bench-attachments);
  - main.py: the command lines, the groups `--only` chooses among, and the table's order;
  - report.py: the Markdown table and the JSON.

Run it from the repository root with the project's interpreter:
    .venv/bin/python scripts/bench                 # 21 runs at 0, 10,000 and 100,000 archived messages
    .venv/bin/python scripts/bench --quick         # a smoke run: 5 runs at 0 and 1,000, small bursts
    .venv/bin/python scripts/bench --runs 11 --sizes 0,10000 --only reads,moments --json
    .venv/bin/python scripts/bench-attachments --runs 21
The table (or JSON) goes to standard output, progress to standard error.
"""
