"""Installing gitmail into the hosts, one module per job:

- `settings`: the engine every installable thing goes through: read, plan as changes, diff, back up, write
  atomically (through the store's writer), and the steps after; `jsonedit` edits JSON in place.
- `hook_commands`: the hooks themselves: the moments, the host event for each, the marked command line and entry.
- `hook_settings`: gitmail's entries in the `hooks` object of a host's JSON settings (both hosts share its shape).
- `claude_hooks`, `codex_hooks`: each host's hooks, where it keeps them and what goes with them (for Codex its
  config.toml, edited by `codex_config`, and its trust, recorded as Codex does by `codex_trust`).
- `host_hooks`: the hosts at once: which are here, one plan for all. `status`: what is installed, for `doctor`.
- `mcp_registration`: `gitmail mcp` registered with both hosts.

Something new to install is a module of its own that returns a `settings.Plan`.
"""
