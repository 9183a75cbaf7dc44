"""The MCP server: the stdio protocol loop and subscriptions (server.py), the tools as thin calls of the action
layer (tools.py), and how a client's repository is found from its roots (roots.py)."""
