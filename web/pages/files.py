"""The Files panel of the chat page (HTML, htmx): the current branch's workspace as a tree, a
file's view (highlighted server-side), download, upload and delete.

The panel comes with the page; from then on only its tree changes: in the answer to the
reader's own change, in every refresh (web.pages.live), and fetched alone when the socket says
the workspace changed (workspace/_files_reload.html), so a live update never touches an open file
view or an upload form being filled in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_POST
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_for_filename
from pygments.util import ClassNotFound

from core.errors import HTTP_STATUS, DomainError, InvalidInput
from core.http import HtmxHttpRequest, domain_errors
from sessions_app.models import Branch, Session
from sessions_app.selectors import current_branch, get_session_for_user
from web.file_responses import PREVIEWED_IMAGES, binary_type, file_response
from workspace.errors import FileNotFoundInWorkspace, FileTooLarge, TooManyFiles
from workspace.nfc import nfc
from workspace.quota import session_use, user_use
from workspace.selectors import WorkspaceFile, workspace_file_bytes, workspace_files
from workspace.services import file_delete, files_write_all
from workspace.validation import clean_file_content, clean_path, max_file_bytes, max_files

from .tabs import PageView, answers_with_new_state

# Past this many characters a file is shown plain: highlighting is for reading, and some
# lexers are slow on long input.
HIGHLIGHT_LIMIT = 100_000
# The most files one upload takes (each is also held to the workspace's own limits).
UPLOAD_MAX_FILES = 50

_formatter = HtmlFormatter(nowrap=True)


@dataclass
class Node:
    """One entry of the tree: a folder (with its children) or a file."""

    name: str
    path: str
    is_dir: bool
    size: int = 0  # a file's bytes; a folder's file count (all levels)
    children: list[Node] = field(default_factory=list)

    @property
    def key(self) -> str:
        """A stable id for the page (a path may hold characters an HTML id cannot), so a live
        update morphs each entry into itself and a collapsed folder stays collapsed."""
        return hashlib.sha256(self.path.encode()).hexdigest()[:16]


def file_tree(files: list[WorkspaceFile]) -> list[Node]:
    """The workspace's files as nested folders: at each level folders first, then files, by
    name. One pass over the (path-sorted) files."""
    root = Node("", "", True)
    folders: dict[str, Node] = {"": root}
    for f in files:
        parts = f.path.split("/")
        parent = root
        for depth in range(1, len(parts)):
            folder_path = "/".join(parts[:depth])
            folder = folders.get(folder_path)
            if folder is None:
                folder = Node(parts[depth - 1], folder_path, True)
                folders[folder_path] = folder
                parent.children.append(folder)
            folder.size += 1
            parent = folder
        parent.children.append(Node(parts[-1], f.path, False, f.size))
    for folder in folders.values():
        folder.children.sort(key=lambda n: (not n.is_dir, n.name))
    return root.children


def highlighted_file(path: str, content: str) -> tuple[SafeString, str]:
    """`content` as HTML, highlighted by the lexer its file name calls for (Pygments escapes
    every character of it), else escaped plain text; and the language's name ("" for plain)."""
    name = path.rsplit("/", 1)[-1]
    if len(content) <= HIGHLIGHT_LIMIT:
        try:
            lexer = get_lexer_for_filename(name, stripnl=False, ensurenl=False)
        except ClassNotFound:
            lexer = None
        if lexer is not None:
            html: str = highlight(content, lexer, _formatter)  # Pygments is untyped
            return mark_safe(html), str(lexer.name)  # noqa: S308 - Pygments escaped the text
    return escape(content), ""


def _tree_context(session: Session, files: list[WorkspaceFile] | None = None) -> dict[str, Any]:
    if files is None:
        files = workspace_files(current_branch(session))
    return {
        "session": session,
        "tree": file_tree(files),
        "file_count": len(files),
        "session_use": session_use(session.pk),
        "user_use": user_use(session.owner_id),
    }


def files_state(
    session: Session, branch: Branch, *, open_path: str = "", sha: str = ""
) -> dict[str, Any]:
    """The Files panel's tree of `branch` (the current one), and whether the file open in the
    reader's view (`open_path`, at version `sha`) was since deleted or changed."""
    files = workspace_files(branch)
    return {**_tree_context(session, files), **_stale(open_path, sha, files)}


def _tree_update(request: HttpRequest, session: Session, branch: Branch) -> str:
    """After this tab's own change: the tree as it now is, out of band, checked against the
    file open in the tab's view (X-Rollback-View)."""
    view = PageView.of(request)
    context = files_state(session, branch, open_path=view.open_path, sha=view.open_sha)
    return render_to_string("workspace/_files_oob.html", context, request)


def upload_limits() -> dict[str, int]:
    return {"max_file_bytes": max_file_bytes(), "max_files": max_files()}


@login_required
@require_GET
@domain_errors
def files_panel(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The whole panel: the count, the upload form, the tree and an empty file view."""
    session = get_session_for_user(request.user, pk)
    context = {**_tree_context(session), **upload_limits()}
    return render(request, "workspace/_files_panel.html", context)


@login_required
@require_GET
@domain_errors
def files_tree(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The tree of the current branch's files (the panel's list; its count out of band)."""
    session = get_session_for_user(request.user, pk)
    context = files_state(
        session,
        current_branch(session),
        open_path=request.GET.get("open", ""),
        sha=request.GET.get("open_sha", ""),
    )
    return render(request, "workspace/_files_tree.html", context)


def _stale(path: str, sha: str, files: list[WorkspaceFile]) -> dict[str, str]:
    """Whether the file open in the reader's view (`path`, at version `sha`) was since deleted
    or changed: the view stays as it is, with a notice saying so."""
    path = nfc(path)
    if not path:
        return {}
    found = next((f for f in files if f.path == path), None)
    if found is None:
        return {"stale_path": path, "stale": "deleted"}
    changed = found.sha256 != sha
    return {"stale_path": path, "stale": "changed" if changed else ""}


@login_required
@require_GET
@domain_errors
def file_view(request: HtmxHttpRequest, pk: int, path: str) -> HttpResponse:
    """A text file highlighted; an image shown; any other binary file named, to download."""
    session = get_session_for_user(request.user, pk)
    found, content = workspace_file_bytes(current_branch(session), path)
    context: dict[str, Any] = {"session": session, "file": found}
    if content.text is None:
        kind = binary_type(found.path)
        context.update(binary=True, kind=kind, image=kind in PREVIEWED_IMAGES)
    else:
        code, language = highlighted_file(found.path, content.text)
        context.update(code=code, language=language)
    return render(request, "workspace/_file_view.html", context)


@login_required
@require_GET
@domain_errors
def file_image(request: HtmxHttpRequest, pk: int, path: str) -> HttpResponse:
    """An image file of the current branch inline, for the Files panel's preview: PNG, JPEG, GIF
    or WebP only (never SVG, which can hold a script), with `nosniff`; anything else is a 404."""
    session = get_session_for_user(request.user, pk)
    found, content = workspace_file_bytes(current_branch(session), path)
    if content.text is not None or binary_type(found.path) not in PREVIEWED_IMAGES:
        raise FileNotFoundInWorkspace(found.path)
    return file_response(found.path, content, inline=True)


@login_required
@require_GET
@domain_errors
def file_download(request: HtmxHttpRequest, pk: int, path: str) -> HttpResponse:
    """The file as an attachment: text as text/plain whatever its name, any other bytes as the
    type its name says (web.file_responses), so a browser never runs it."""
    session = get_session_for_user(request.user, pk)
    found, content = workspace_file_bytes(current_branch(session), path)
    return file_response(found.path, content)


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def file_remove(request: HtmxHttpRequest, pk: int, path: str) -> HttpResponse:
    """Delete a file of the current branch; the view empties and the tree follows."""
    session = get_session_for_user(request.user, pk)
    branch = current_branch(session)
    gone = file_delete(branch=branch, path=path, by="user")
    done = render_to_string("workspace/_file_gone.html", {"path": gone}, request)
    return HttpResponse(done + _tree_update(request, session, branch))


def _checked_uploads(
    folder: str, uploads: list[UploadedFile[Any]]
) -> list[tuple[str, str | bytes]]:
    """(path, text) for each uploaded file, every one checked before anything is written: one
    bad file refuses the whole upload with its name in the message."""
    if not uploads:
        raise InvalidInput("Choose one or more files to upload.")
    if len(uploads) > UPLOAD_MAX_FILES:
        raise TooManyFiles(f"Upload at most {UPLOAD_MAX_FILES} files at a time.")
    checked: list[tuple[str, str | bytes]] = []
    for upload in uploads:
        name = upload.name or ""
        if (upload.size or 0) > max_file_bytes():
            raise FileTooLarge(
                f"'{name}' is {upload.size:,} bytes; a workspace file may hold at most "
                f"{max_file_bytes():,} bytes (WORKSPACE_MAX_FILE_BYTES). Nothing was written."
            )
        try:
            path = clean_path(f"{folder}/{name}" if folder else name)
            content = clean_file_content(upload.read())
        except DomainError as exc:  # the same refusal, naming the file it is about
            named = DomainError(f"'{name}': {exc.people}")
            named.code = exc.code
            raise named from None
        checked.append((path, content.raw))
    return checked


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def files_upload(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Upload files (text or binary) into a folder of the current branch's workspace
    (multipart). Refused as a whole, with the reason in the form, when any file is not
    acceptable."""
    session = get_session_for_user(request.user, pk)
    raw_folder = request.POST.get("folder", "")
    context: dict[str, Any] = {"session": session, "folder": raw_folder, **upload_limits()}
    try:
        folder = clean_path(raw_folder, directory=True)
        checked = _checked_uploads(folder, request.FILES.getlist("files"))
        branch = current_branch(session)
        written = files_write_all(branch=branch, files=checked, by="user")
    except DomainError as exc:
        context["error"] = exc.people
        html = render_to_string("workspace/_upload_form.html", context, request)
        return HttpResponse(html, status=HTTP_STATUS.get(exc.code, 400))
    context["uploaded"] = written
    html = render_to_string("workspace/_upload_form.html", context, request)
    return HttpResponse(html + _tree_update(request, session, branch))
