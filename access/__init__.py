"""Access: what a user's groups let them do (issue 40, item 3).

An administrator gives a Django group an access rule (`AccessRule`, in the admin): which models
its members may pick, which of the operator's custom tools (AGENT_TOOLS) the agent offers them,
and whether they may share links, use the shell tools or use the API. A user's permissions add
up across the groups that have a rule; a user in no group with a rule gets the default rule (the
one with no group), and with no default rule, everything, as before groups existed.
Administrators (superusers) get everything. MCP servers are given to groups on the server itself
(agents.mcp.access). One function decides (`allowance_for`); every door asks it.
"""
