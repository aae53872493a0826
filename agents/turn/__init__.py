"""One turn, in named steps, each a module of this package (read them in this order):

1. claim (`claim.py`): the turn becomes this worker's, fenced by its attempt; a heartbeat keeps
   it so, and notices a Stop or a take-over.
2. fit (`fit.py`): the branch's history fitted into the model's window, the user's memories in
   the instructions.
3. stream (`stream.py`): the agent runs; every model event is relayed to the browser as it comes.
4. settle (`settle.py`): what the run came to; a stopped, taken-over or failed turn ends here.
5. store (`store.py`): the new messages, the reply, the automatic checkpoint and a requested
   rollback, in one transaction.
6. after (`after.py`): the log line, and for a worker's turn the title and summaries ahead.

`pipeline.py` runs them top-down for each door: a worker (Celery or the embedded pool, through
agents.worker) and the Python API (`RollbackAgent.run`). What one attempt holds is
agents.turn_state (`TurnState`: made when it starts, dropped when it ends), which the agent's
tools and hooks read and a pause saves; `surface.py` is the part of the agent the steps use.
"""
