"""The agent's workspace and plan tools, the names the model sees: `list_dir`, `read_file`,
`write_file`, `delete_file`, and `create_todo`, `get_todo`, `mark_todo_done`.

They are methods of RollbackAgent (this mixin), so agno offers them as bound methods like the
checkpoint tools, their docstrings' Args: being the schema. They act on the agent's branch: the
files through workspace.services (a write names the running turn, so it is refused once that
turn was stopped or taken over, and dropped with the turn's messages if the turn does not end
well), the plan in the branch's session state (under "todos"), which a checkpoint captures and a
restore brings back like the files.

A tool never raises: every refusal (a bad path, binary content, a file too large, too many
files, a write over a storage quota, no such file, a turn that no longer writes) comes back to
the model as its result, starting with "✗ ", and nothing is written. Paths are taken in NFC
(workspace.validation), whichever form the model sends.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypedDict

from core.errors import DomainError
from workspace.errors import BinaryFile
from workspace.pdf_text import is_pdf, pdf_text
from workspace.selectors import directory, workspace_file, workspace_file_bytes, workspace_files
from workspace.services import file_delete, file_write
from workspace.validation import clean_path

from .mcp.vision import image_type_of, sees_images

if TYPE_CHECKING:
    from sessions_app.models import Branch, Turn

    from .turn_state import TurnState

# What read_file shows the model of one file: a file may hold 256 KB (WORKSPACE_MAX_FILE_BYTES),
# more than a model's window should spend on one read.
READ_FILE_CHARS = 20_000
# The entries list_dir shows of one folder.
LIST_DIR_ENTRIES = 200
# The plan's bounds: a title's length and how many items it may hold (done ones included).
TODO_KEY = "todos"
TODO_TITLE_CHARS = 200
TODO_MAX = 100


class Todo(TypedDict):
    id: int
    title: str
    done: bool


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


class FileTools:
    """The workspace and plan tools of an agent that works on one branch."""

    internal_session: Branch
    # The running turn's attempt (agents.turn_state): the file tools write in its turn's name.
    # None outside a turn (seed 003's agent used directly): then they write as the agent, in no
    # turn's name.
    turn_state: TurnState | None

    @property
    def _writing_turn(self) -> Turn | None:
        return self.turn_state.turn if self.turn_state is not None else None

    def plan_state(self) -> dict[str, Any]:
        """The state the plan lives in (the agent's session state, made when it has none)."""
        raise NotImplementedError

    # --- files -------------------------------------------------------------------------------

    def list_dir(self, path: str = "") -> str:
        """List the files and folders of the workspace (the session's files), under a folder.
        Folders end with "/" and show how many files they hold; files show their size.

        Args:
            path: the folder to list, e.g. "notes"; "" (the default) for the whole workspace.
        """
        try:
            folder = clean_path(path, directory=True)
            files = workspace_files(self.internal_session, path=folder or None)
        except DomainError as exc:
            return f"✗ {exc.message}"
        if folder and any(f.path == folder for f in files):
            return f"✗ '{folder}' is a file, not a folder: use read_file to read it."
        entries = directory(files, folder)
        if not entries:
            return (
                f"✗ No folder '{folder}' in the workspace." if folder else "The workspace is empty."
            )
        lines = [f"Files in {folder + '/' if folder else 'the workspace'}:"]
        for entry in entries[:LIST_DIR_ENTRIES]:
            if entry.is_dir:
                lines.append(f"{entry.name}/ ({_plural(entry.size, 'file')})")
            else:
                lines.append(f"{entry.name} ({_plural(entry.size, 'byte')})")
        if len(entries) > LIST_DIR_ENTRIES:
            lines.append(f"… and {len(entries) - LIST_DIR_ENTRIES:,} more entries.")
        return "\n".join(lines)

    def read_file(self, path: str) -> Any:
        """Read a text file of the workspace, the text of a PDF, or look at an image (PNG, JPEG,
        GIF, WebP) when you take images. A long file is cut, with a note saying so.

        Args:
            path: the file's path in the workspace, e.g. "notes/plan.md".
        """
        try:
            _, content = workspace_file(self.internal_session, path)
        except BinaryFile as exc:
            return self._read_binary(path, exc)
        except DomainError as exc:
            return f"✗ {exc.message} Use list_dir to see the files."
        if content.startswith("%PDF-"):  # a PDF written in ASCII only: kept as text
            return self._pdf(path, content.encode())
        if len(content) <= READ_FILE_CHARS:
            return content
        return (
            content[:READ_FILE_CHARS]
            + f"\n[… cut here: the file has {len(content):,} characters; only the first "
            f"{READ_FILE_CHARS:,} are shown.]"
        )

    def _read_binary(self, path: str, refused: BinaryFile) -> Any:
        """A PDF's text (workspace.pdf_text), an image (`_image`); any other binary file is
        refused as it was."""
        try:
            found, content = workspace_file_bytes(self.internal_session, path)
        except DomainError as exc:
            return f"✗ {exc.message}"
        if is_pdf(content.raw):
            return self._pdf(found.path, content.raw)
        mime = image_type_of(content.raw)
        if mime is not None:
            return self._image(found.path, mime, content.raw)
        return f"✗ {refused.message}"

    def _image(self, path: str, mime: str, data: bytes) -> Any:
        """An image for a model that takes images (AGENT_VISION_MODELS): agno gives it to the
        model after the call (agents.mcp.vision), and the call's message keeps it, as an MCP
        tool's image. Another model is told it cannot see it."""
        kind = f"{mime}, {_plural(len(data), 'byte')}"
        if not sees_images(getattr(self, "model", None)):
            return (
                f"✗ '{path}' is an image ({kind}), and this model does not take images: it "
                "cannot be shown to you. Ask the user what it shows, or use a model that "
                "takes images."
            )
        from agno.media import Image
        from agno.tools.function import ToolResult

        from .mcp.vision import MAX_IMAGE_BYTES

        if len(data) > MAX_IMAGE_BYTES:
            return (
                f"✗ '{path}' is an image ({kind}) larger than the {MAX_IMAGE_BYTES:,} bytes a "
                "model is shown: it can be downloaded, or made smaller by a command."
            )
        image = Image(id=f"img-{uuid.uuid4().hex[:12]}", content=data, mime_type=mime)
        return ToolResult(
            content=f"[The image {path}, attached after this result]\n[image {image.id}: {kind}]",
            images=[image],
        )

    def _pdf(self, path: str, data: bytes) -> str:
        try:
            extracted = pdf_text(path, data, chars=READ_FILE_CHARS)
        except DomainError as exc:
            return f"✗ {exc.message}"
        head = f"[The text of the PDF {path}: {_plural(extracted.pages, 'page')}."
        if not extracted.text:
            return head + " It has no text to extract (scanned pages are images).]"
        tail = ""
        if extracted.cut and len(extracted.text) >= READ_FILE_CHARS:
            tail = f"\n[… cut here: only the first {READ_FILE_CHARS:,} characters are shown.]"
        elif extracted.cut:
            tail = f"\n[… cut here: only the first {_plural(extracted.read, 'page')} were read.]"
        return f"{head}]\n{extracted.text}{tail}"

    def write_file(self, path: str, content: str) -> str:
        """Write a text file of the workspace: create it, or replace its content. Folders are
        made as needed. The user can restore the files of any checkpoint.

        Args:
            path: the file's path in the workspace, e.g. "notes/plan.md" (relative, no "..").
            content: the file's whole new content (UTF-8 text).
        """
        try:
            written = file_write(
                branch=self.internal_session,
                path=path,
                content=content,
                turn=self._writing_turn,
                by="agent",
            )
        except DomainError as exc:
            return f"✗ {exc.message}"
        verb = "Created" if written.created else "Updated"
        return f"✓ {verb} {written.file.path} ({_plural(written.file.size, 'byte')})."

    def delete_file(self, path: str) -> str:
        """Delete a file of the workspace (a checkpoint from before still has it).

        Args:
            path: the file's path in the workspace, e.g. "notes/old.md".
        """
        try:
            gone = file_delete(
                branch=self.internal_session, path=path, turn=self._writing_turn, by="agent"
            )
        except DomainError as exc:
            return f"✗ {exc.message}"
        return f"✓ Deleted {gone}."

    # --- the plan ----------------------------------------------------------------------------

    def _todos(self) -> list[Todo]:
        """The plan's items as stored (anything malformed in the state left out)."""
        items = self.plan_state().get(TODO_KEY)
        todos: list[Todo] = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("id"), int):
                todos.append(
                    {
                        "id": item["id"],
                        "title": str(item.get("title", "")),
                        "done": bool(item.get("done")),
                    }
                )
        return todos

    def _save_todos(self, todos: list[Todo]) -> None:
        self.plan_state()[TODO_KEY] = [dict(t) for t in todos]

    def create_todo(self, title: str) -> str:
        """Add an item to your plan for this conversation (its todo list).

        Args:
            title: what to do, in one line, e.g. "Write the README".
        """
        text = " ".join(str(title or "").split())
        if not text:
            return "✗ A todo needs a title."
        if len(text) > TODO_TITLE_CHARS:
            return f"✗ A todo's title may hold at most {TODO_TITLE_CHARS} characters."
        todos = self._todos()
        if len(todos) >= TODO_MAX:
            return f"✗ The plan already holds {TODO_MAX} todos, the most it may."
        todo: Todo = {
            "id": max((t["id"] for t in todos), default=0) + 1,
            "title": text,
            "done": False,
        }
        self._save_todos([*todos, todo])
        return f"✓ Added todo {todo['id']}: {text}"

    def get_todo(self) -> str:
        """Show your plan for this conversation: each todo with its id, done or not."""
        todos = self._todos()
        if not todos:
            return "The todo list is empty."
        lines = ["Todo list:"]
        lines += [f"{t['id']}. [{'x' if t['done'] else ' '}] {t['title']}" for t in todos]
        done = sum(t["done"] for t in todos)
        lines.append(f"{done} of {len(todos)} done.")
        return "\n".join(lines)

    def mark_todo_done(self, todo_id: int) -> str:
        """Mark one todo of your plan as done.

        Args:
            todo_id: the todo's id, as get_todo shows it.
        """
        try:
            wanted = int(todo_id)
        except (TypeError, ValueError):
            return "✗ A todo's id is a number, as get_todo shows it."
        todos = self._todos()
        for todo in todos:
            if todo["id"] == wanted:
                if todo["done"]:
                    return f"Todo {wanted} was already done: {todo['title']}"
                todo["done"] = True
                self._save_todos(todos)
                return f"✓ Marked todo {wanted} done: {todo['title']}"
        return f"✗ No todo {wanted} in the plan. Use get_todo to see the todos."
