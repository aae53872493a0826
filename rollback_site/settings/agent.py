"""The agent and its model, its tools (custom and MCP), and the limits of what a user keeps:
memories, the workspace's files, sessions, metadata, imports and share links."""

from __future__ import annotations

import os

from rollback_site.settings.env import env

# --- The agent ------------------------------------------------------------------------------
OPENAI_API_KEY = env.OPENAI_API_KEY
OPENAI_BASE_URL = env.OPENAI_BASE_URL
AGENT_MODEL = env.AGENT_MODEL
AGENT_MAX_RETRIES = env.AGENT_MAX_RETRIES
AGENT_MAX_INPUT_CHARS = env.AGENT_MAX_INPUT_CHARS
AGENT_TIMEOUT = env.AGENT_TIMEOUT
# The models a session may choose in metadata.settings.model (every request is billed to the
# operator's key): comma-separated ids; empty means AGENT_MODEL alone. AGENT_MODEL is always
# allowed, and so is the demo model's id when the demo model answers (core.model_choice).
AGENT_ALLOWED_MODELS = env.AGENT_ALLOWED_MODELS
# Sent with each request as max_tokens (0: not sent, the server's own limit applies).
AGENT_MAX_OUTPUT_TOKENS = env.AGENT_MAX_OUTPUT_TOKENS
# The model's context window in tokens: each request (instructions, tools, history, the new
# message) plus the reply's reserve (AGENT_MAX_OUTPUT_TOKENS) fits in it. Older messages that do
# not fit are summarised by the model (agents.context). A session may set its own
# (metadata.settings.context_tokens).
AGENT_CONTEXT_TOKENS = env.AGENT_CONTEXT_TOKENS
# The most characters of one model response kept: a longer stream is stopped there and the reply
# stored cut off, with a note, and finish_reason "length". Stored tool arguments and results are
# bounded the same way.
AGENT_MAX_REPLY_CHARS = env.AGENT_MAX_REPLY_CHARS
# The most tool calls the model may ask for in one turn. Past it the model gets no more requests
# (at most AGENT_MAX_TOOL_CALLS + 1 per turn): the turn ends with a note and finish_reason
# "tool_limit". 0: no tool runs, the first tool call ends the turn.
AGENT_MAX_TOOL_CALLS = env.AGENT_MAX_TOOL_CALLS
# Custom tools offered to every agent beside the built-in ones: the dotted paths of functions (or
# agno toolkits), comma-separated or as a JSON list, e.g. AGENT_TOOLS=mypkg.tools.lookup_order.
# Loaded and checked when the app starts (agents.tools); one named like a built-in tool replaces
# it, and the start logs that.
AGENT_TOOLS = env.AGENT_TOOLS
# The operator's MCP servers (streamable HTTP), a JSON list of {"name", "url", "headers"?,
# "approval"?: [tool names], "enabled"?}: checked when the app starts, written into the admin's
# rows on first use in each process (agents.mcp). Their tools reach the model as <name>__<tool>.
# Each listing and each call waits AGENT_MCP_TIMEOUT seconds at most; a server offers at most
# AGENT_MCP_MAX_TOOLS tools whose schemas are at most AGENT_MCP_MAX_SCHEMA_CHARS of JSON; a
# result is cut at AGENT_MCP_MAX_RESULT_CHARS characters.
AGENT_MCP_SERVERS = env.AGENT_MCP_SERVERS
AGENT_MCP_TIMEOUT = env.AGENT_MCP_TIMEOUT
# A custom or MCP tool's call runs off the turn's thread and is given up on after its deadline
# (agents.tool_deadline); a process keeps at most AGENT_TOOL_MAX_ABANDONED such calls running.
AGENT_TOOL_TIMEOUT_SECONDS = env.AGENT_TOOL_TIMEOUT_SECONDS
AGENT_TOOL_MAX_ABANDONED = env.AGENT_TOOL_MAX_ABANDONED
# A server that failed is not contacted for this long (doubling per failure in a row, at most
# 16 times); the catalogues of the servers' tools are listed again this often (beat).
AGENT_MCP_BACKOFF_SECONDS = env.AGENT_MCP_BACKOFF_SECONDS
AGENT_MCP_REFRESH_SECONDS = env.AGENT_MCP_REFRESH_SECONDS
# At most this many stdio servers run at once in one process, kept between turns and shared by
# them (agents.mcp.kept); at the bound an idle one is closed, and when every one is in use a
# turn's call fails with a clear result. One unused for AGENT_MCP_STDIO_IDLE_SECONDS is closed.
AGENT_MCP_MAX_STDIO = env.AGENT_MCP_MAX_STDIO
AGENT_MCP_STDIO_IDLE_SECONDS = env.AGENT_MCP_STDIO_IDLE_SECONDS
AGENT_MCP_MAX_TOOLS = env.AGENT_MCP_MAX_TOOLS
AGENT_MCP_MAX_SCHEMA_CHARS = env.AGENT_MCP_MAX_SCHEMA_CHARS
AGENT_MCP_MAX_RESULT_CHARS = env.AGENT_MCP_MAX_RESULT_CHARS
# The models (shell-style patterns of their names) that are given a tool's images as image
# content (agents.mcp.vision); any other model, and the demo model, gets their text line only.
AGENT_VISION_MODELS = env.AGENT_VISION_MODELS

# Pause between the demo model's streamed words, so its replies visibly stream in.
DEMO_MODEL_WORD_DELAY = env.DEMO_MODEL_WORD_DELAY
os.environ.setdefault("AGNO_TELEMETRY", "false")

# --- Memories (memories/) ------------------------------------------------------------------
# Facts about a user the agent keeps across sessions. The longest L2 details of one memory, in
# characters (longer: 413); how many memories one user may keep; the characters of L0 lines the
# system prompt of each turn carries (0: none); how many matches the agent's recall returns.
MEMORY_L2_MAX_CHARS = env.MEMORY_L2_MAX_CHARS
MEMORY_MAX_PER_USER = env.MEMORY_MAX_PER_USER
MEMORY_PROMPT_CHARS = env.MEMORY_PROMPT_CHARS
MEMORY_RECALL_LIMIT = env.MEMORY_RECALL_LIMIT

# --- The workspace (workspace/) ---------------------------------------------------------------
# A session's text files, versioned with its branches: the largest file in bytes (UTF-8) and the
# most files one workspace (a branch as it stands) may hold. A write past either is refused with
# a clear error and writes nothing; the agent's tool gets that error as its result.
WORKSPACE_MAX_FILE_BYTES = env.WORKSPACE_MAX_FILE_BYTES
WORKSPACE_MAX_FILES = env.WORKSPACE_MAX_FILES
# Storage quotas (workspace/quota.py): the file versions and the bytes of distinct file contents
# one session's workspace, and all of one user's sessions together, may keep (every write keeps a
# version for the checkpoints; a content is stored once per session). A write past one is refused
# (413) and writes nothing; the dashboard and the Files panel show the usage. 0: no quota.
WORKSPACE_SESSION_MAX_VERSIONS = env.WORKSPACE_SESSION_MAX_VERSIONS
WORKSPACE_SESSION_MAX_BYTES = env.WORKSPACE_SESSION_MAX_BYTES
WORKSPACE_USER_MAX_VERSIONS = env.WORKSPACE_USER_MAX_VERSIONS
WORKSPACE_USER_MAX_BYTES = env.WORKSPACE_USER_MAX_BYTES

# --- The sandbox of run_shell and run_tests (sandbox/) ----------------------------------------
# A command the agent runs works on a copy of the branch's workspace under bubblewrap
# (SANDBOX_BWRAP), with no network, the system's folders read-only (SANDBOX_READ_PATHS beside
# them), a private /tmp of SANDBOX_TMP_BYTES, an unprivileged uid. It is killed past its timeout
# (its own, at most SANDBOX_MAX_SECONDS; SANDBOX_TIMEOUT_SECONDS when it names none), its CPU
# seconds, or when what it leaves passes SANDBOX_MAX_DISK_BYTES or SANDBOX_MAX_FILES. Each process
# may use SANDBOX_MEMORY_BYTES of memory and SANDBOX_MAX_OPEN_FILES files, the run
# SANDBOX_MAX_PROCESSES processes; SANDBOX_MAX_OUTPUT_BYTES of its stdout and of its stderr are
# kept. A worker runs at most SANDBOX_PER_WORKER commands at once. SANDBOX=off (or no
# bubblewrap, or no user namespaces) offers neither tool: a command never runs unsandboxed.
SANDBOX = env.SANDBOX
SANDBOX_BWRAP = env.SANDBOX_BWRAP
SANDBOX_DIR = env.SANDBOX_DIR
SANDBOX_READ_PATHS = env.SANDBOX_READ_PATHS
SANDBOX_TIMEOUT_SECONDS = env.SANDBOX_TIMEOUT_SECONDS
SANDBOX_MAX_SECONDS = env.SANDBOX_MAX_SECONDS
SANDBOX_MEMORY_BYTES = env.SANDBOX_MEMORY_BYTES
SANDBOX_MAX_PROCESSES = env.SANDBOX_MAX_PROCESSES
SANDBOX_MAX_OPEN_FILES = env.SANDBOX_MAX_OPEN_FILES
SANDBOX_MAX_OUTPUT_BYTES = env.SANDBOX_MAX_OUTPUT_BYTES
SANDBOX_MAX_DISK_BYTES = env.SANDBOX_MAX_DISK_BYTES
SANDBOX_MAX_FILES = env.SANDBOX_MAX_FILES
SANDBOX_TMP_BYTES = env.SANDBOX_TMP_BYTES
# The sandbox's network (sandbox.network): `none` (the default), `all` (the host's network as it
# is: the app's own ports and databases too), or hosts reached through a proxy the app starts
# for each run (HTTPS CONNECT only, to those hosts only). With any network a command's effect is
# `external` (the ledger keeps it; a restore cannot undo what it did outside), and each call
# waits for its owner's approval unless SANDBOX_NETWORK_APPROVAL is off.
SANDBOX_NETWORK = env.SANDBOX_NETWORK
SANDBOX_NETWORK_APPROVAL = env.SANDBOX_NETWORK_APPROVAL
SANDBOX_PER_WORKER = env.SANDBOX_PER_WORKER

# --- Rollback limits ------------------------------------------------------------------------
ROLLBACK_IMPORT_MAX_BYTES = env.ROLLBACK_IMPORT_MAX_BYTES
# Imports of other apps' exports (checkpoints.foreign): the most conversations one file may hold
# (a file of several is imported by a job), and the most messages (nodes) of one conversation.
ROLLBACK_IMPORT_MAX_CONVERSATIONS = 5_000
ROLLBACK_IMPORT_MAX_MESSAGES = 20_000
# The largest metadata of a session, branch, checkpoint or message, and the largest session state
# of a branch (which every checkpoint copies), measured as compact JSON in UTF-8.
ROLLBACK_METADATA_MAX_BYTES = env.ROLLBACK_METADATA_MAX_BYTES
ROLLBACK_STATE_MAX_BYTES = env.ROLLBACK_STATE_MAX_BYTES
# How many sessions (archived ones included) one user may have; creating or importing one more
# is refused until some are deleted.
ROLLBACK_MAX_SESSIONS_PER_USER = env.ROLLBACK_MAX_SESSIONS_PER_USER
# The most share links (sharing/) one account may keep; one more is refused (409).
ROLLBACK_MAX_SHARES_PER_USER = env.ROLLBACK_MAX_SHARES_PER_USER
