"""The words that open the requests the offline demo model answers its own way (agents.demo_model).

They live apart from the demo model, which is built on agno, so that what writes these requests
(agents.context, agents.titles, agents.history) can be imported without agno: django.setup()
imports agents.context (the summarising task), and a process that runs no turn never loads agno.
"""

from __future__ import annotations

# The summarising requests of agents.context start their instructions with this; the demo
# model then answers with an extract of the conversation instead of its usual reply.
SUMMARY_MARKER = "You write the running summary of a conversation"

# The titling requests of agents.titles start their instructions with this; the demo model then
# answers with a title made of the first words of the user's first message.
TITLE_MARKER = "You give conversations short titles"

# A turn that continues a cut-off reply (agents.history.CONTINUE_INSTRUCTION) asks with this;
# the demo model then goes on with a short ending instead of quoting the request.
CONTINUE_MARKER = "Your previous reply was cut off"
