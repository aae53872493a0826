"""The Markdown export: the current branch only (a restored branch's inherited history and its
checkpoints included, the abandoned part not), every role, names that cannot become Markdown."""

from __future__ import annotations

import pytest

from checkpoints.services import checkpoint_create, checkpoint_restore
from checkpoints.transfer_markdown import session_markdown
from sessions_app.services import message_append, session_update

pytestmark = pytest.mark.django_db


def test_the_current_branch_is_exported_with_its_inherited_history(session, branch):
    message_append(branch=branch, role="user", content="first question")
    message_append(branch=branch, role="assistant", content="first answer")
    kept = checkpoint_create(branch=branch, name="kept")
    message_append(branch=branch, role="user", content="abandoned question")
    checkpoint_restore(checkpoint=kept, mode="branch")
    text = session_markdown(session=session)
    assert "first question" in text
    assert "first answer" in text
    assert "abandoned question" not in text
    # The checkpoint the branch starts from is marked at the end of what it holds.
    assert "Checkpoint **kept** (after 2 messages" in text.rstrip().splitlines()[-1]


def test_every_role_has_its_heading_and_names_stay_plain_text(session, branch):
    session_update(session=session, name="# *Not* a [link](x)")
    message_append(branch=branch, role="system", content="Be brief.")
    message_append(branch=branch, role="user", content="<script>alert(1)</script>")
    message_append(branch=branch, role="assistant", content="")
    message_append(
        branch=branch, role="tool", tool_name="calculate", tool_args={"expression": "`rm`"},
        tool_result="x" * 500,
    )  # fmt: skip
    text = session_markdown(session=session)
    assert text.startswith("# \\# \\*Not\\* a \\[link\\]\\(x\\)\n")
    assert "## System\n" in text
    assert "```text\nBe brief.\n```" in text
    assert "```text\n<script>alert(1)</script>\n```" in text
    assert "## Assistant" in text
    assert "*(called tools)*" in text
    tool_line = next(line for line in text.splitlines() if line.startswith("- `calculate`"))
    assert "'rm'" in tool_line  # a backtick cannot end the code span early
    assert tool_line.endswith("…`")
    assert len(tool_line) < 300
