"""The sandbox of the agent's `run_shell` and `run_tests`: a command run under bubblewrap over a
copy of a branch's workspace, whose changes become the turn's write, so a restore undoes them.

- `runner`: one command under bubblewrap over a folder, bounded in time, CPU, memory, processes,
  open files, output and what it leaves on disk; killed whole (its PID namespace) on a timeout,
  a Stop or a bound passed.
- `folders`: a workspace written out into a fresh folder, and what the command left there read
  back (regular files only, never through a link; the rest named with the reason).
- `availability`: whether this process can run a sandbox at all (SANDBOX, bubblewrap, user
  namespaces), probed once; without it the tools are not offered and /healthz says why.
- `services`: `shell_run`, the whole of one run for a branch, taken back as one write.
"""
