"""Installing gitmail into the hosts: a file-edit engine that changes only what it added, Claude Code's settings
and plugin, Codex's hooks, config and trust, the MCP client configurations, and what is installed now."""
