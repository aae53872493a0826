"""Writing, reading, listing and deleting a branch's files; folders; and bad input, each refused
with a clear error that writes nothing."""

from __future__ import annotations

import hashlib

import pytest
from django.utils.html import escape
from django_htmx.middleware import HtmxDetails

from core.api import exception_handler
from core.errors import Conflict
from core.http import domain_errors
from workspace.errors import (
    BadPath,
    BinaryContent,
    BinaryFile,
    FileNotFoundInWorkspace,
    FileTooLarge,
    TooManyFiles,
)
from workspace.models import FileVersion, WorkspaceBlob
from workspace.selectors import directory, workspace_file, workspace_file_bytes, workspace_files
from workspace.services import file_delete, file_write

pytestmark = pytest.mark.django_db


def paths(branch, **kwargs) -> list[str]:
    return [f.path for f in workspace_files(branch, **kwargs)]


def test_a_written_file_reads_back_and_is_listed(branch):
    written = file_write(branch=branch, path="notes/plan.md", content="# Plan\n- one\n")

    assert written.created
    found, content = workspace_file(branch, "notes/plan.md")
    assert content == "# Plan\n- one\n"
    assert (found.size, found.sha256) == (len(b"# Plan\n- one\n"), written.file.sha256)
    assert paths(branch) == ["notes/plan.md"]


def test_writing_again_makes_a_new_version_and_the_newest_is_read(branch):
    first = file_write(branch=branch, path="a.txt", content="one")
    again = file_write(branch=branch, path="a.txt", content="two")

    assert not again.created
    assert again.file.version > first.file.version
    assert workspace_file(branch, "a.txt")[1] == "two"


def test_a_content_is_stored_once_however_many_paths_hold_it(branch):
    file_write(branch=branch, path="a.txt", content="same")
    file_write(branch=branch, path="b/c.txt", content="same")
    file_write(branch=branch, path="a.txt", content="same")

    assert WorkspaceBlob.objects.count() == 1
    assert paths(branch) == ["a.txt", "b/c.txt"]


def test_a_deleted_file_is_gone_and_can_be_written_again(branch):
    file_write(branch=branch, path="a.txt", content="one")

    assert file_delete(branch=branch, path="./a.txt") == "a.txt"

    assert paths(branch) == []
    with pytest.raises(FileNotFoundInWorkspace):
        workspace_file(branch, "a.txt")
    assert file_write(branch=branch, path="a.txt", content="back").created
    assert workspace_file(branch, "a.txt")[1] == "back"


def test_deleting_a_file_that_is_not_there_is_not_found_and_writes_nothing(branch):
    with pytest.raises(FileNotFoundInWorkspace):
        file_delete(branch=branch, path="missing.txt")
    assert not FileVersion.objects.exists()


def test_paths_are_normalised(branch):
    file_write(branch=branch, path=" notes//./plan.md ", content="x")
    assert paths(branch) == ["notes/plan.md"]


def test_a_folder_lists_its_subfolders_first_then_its_files(branch):
    for path in ("z.txt", "docs/b.md", "docs/a.md", "docs/deep/c.md", "a.txt"):
        file_write(branch=branch, path=path, content=path)
    files = workspace_files(branch)

    root = [(e.name, e.is_dir, e.size) for e in directory(files, "")]
    docs = [(e.path, e.is_dir) for e in directory(files, "docs")]

    assert root == [("docs", True, 3), ("a.txt", False, 5), ("z.txt", False, 5)]
    assert docs == [("docs/deep", True), ("docs/a.md", False), ("docs/b.md", False)]
    assert paths(branch, path="docs") == ["docs/a.md", "docs/b.md", "docs/deep/c.md"]


def test_a_folder_filter_is_not_fooled_by_like_wildcards(branch):
    file_write(branch=branch, path="a_b/x.txt", content="1")
    file_write(branch=branch, path="aXb/y.txt", content="2")
    file_write(branch=branch, path="100%/z.txt", content="3")
    file_write(branch=branch, path="1000/w.txt", content="4")

    assert paths(branch, path="a_b") == ["a_b/x.txt"]
    assert paths(branch, path="100%") == ["100%/z.txt"]


def test_a_file_cannot_take_a_folders_place_nor_hold_files(branch):
    file_write(branch=branch, path="docs/a.md", content="a")
    with pytest.raises(Conflict):
        file_write(branch=branch, path="docs", content="a file named like the folder")
    with pytest.raises(Conflict):
        file_write(branch=branch, path="docs/a.md/inner.txt", content="inside a file")
    assert paths(branch) == ["docs/a.md"]


@pytest.mark.parametrize(
    "path",
    [
        "../outside.txt",
        "notes/../../outside.txt",
        "/etc/passwd",
        "C:/windows.txt",
        "a\\b.txt",
        "nul\x00here.txt",
        "bell\x07.txt",
        "",
        "   ",
        "/",
        "a" * 121,
        "/".join(["d" * 100] * 3),
        "lead/ x.txt",
        "x /y.txt",
        42,
        None,
    ],
)
def test_a_bad_path_is_refused_and_nothing_written(branch, path):
    with pytest.raises(BadPath) as refused:
        file_write(branch=branch, path=path, content="x")
    assert refused.value.message
    assert not FileVersion.objects.exists()
    assert not WorkspaceBlob.objects.exists()


@pytest.mark.parametrize("content", ["text with a NUL \x00 inside", "\ud800", 12, None])
def test_text_that_is_not_text_and_what_is_no_content_are_refused(branch, content):
    """A str is text: one with a NUL or a lone surrogate is refused (bytes may say anything)."""
    with pytest.raises(BinaryContent):
        file_write(branch=branch, path="a.bin", content=content)
    assert not FileVersion.objects.exists()
    assert not WorkspaceBlob.objects.exists()


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b"\x89PNG\r\n\x1a\n\x00", b"a\x00b"])
def test_binary_bytes_are_kept_as_they_are_and_not_read_as_text(branch, content):
    written = file_write(branch=branch, path="a.bin", content=content)
    assert written.file.binary
    assert written.file.size == len(content)
    assert written.file.sha256 == hashlib.sha256(content).hexdigest()
    found, stored = workspace_file_bytes(branch, "a.bin")
    assert (found.binary, stored.text, stored.raw) == (True, None, content)
    with pytest.raises(BinaryFile, match="binary file"):
        workspace_file(branch, "a.bin")
    file_write(branch=branch, path="copy.bin", content=content)
    assert WorkspaceBlob.objects.count() == 1  # stored once per session, like a text


def test_utf8_bytes_are_taken_as_text(branch):
    file_write(branch=branch, path="hello.txt", content="héllo ✓".encode())
    assert workspace_file(branch, "hello.txt")[1] == "héllo ✓"


def test_a_file_over_the_size_limit_is_refused_and_nothing_written(branch, settings):
    settings.WORKSPACE_MAX_FILE_BYTES = 10
    file_write(branch=branch, path="ok.txt", content="x" * 10)

    with pytest.raises(FileTooLarge, match="WORKSPACE_MAX_FILE_BYTES"):
        file_write(branch=branch, path="big.txt", content="é" * 6)  # 12 bytes in UTF-8

    assert paths(branch) == ["ok.txt"]
    assert WorkspaceBlob.objects.count() == 1


def test_a_file_past_the_file_count_is_refused_but_existing_files_can_change(branch, settings):
    settings.WORKSPACE_MAX_FILES = 2
    file_write(branch=branch, path="a.txt", content="a")
    file_write(branch=branch, path="b.txt", content="b")

    with pytest.raises(TooManyFiles, match="WORKSPACE_MAX_FILES"):
        file_write(branch=branch, path="c.txt", content="c")

    file_write(branch=branch, path="a.txt", content="a changed")
    file_delete(branch=branch, path="b.txt")
    file_write(branch=branch, path="c.txt", content="c")  # room again
    assert paths(branch) == ["a.txt", "c.txt"]


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (BadPath("x"), 400),
        (BinaryContent(), 400),
        (FileNotFoundInWorkspace("a.txt"), 404),
        (FileTooLarge("x"), 413),
        (TooManyFiles("x"), 413),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_the_errors_are_answered_with_clear_statuses(rf, error, status):
    """400 for a bad path or binary content, 404 for a missing file, 413 past a limit, with the
    error's message: as the API answers them (core.api) and as the pages do (core.http)."""
    api = exception_handler(error, {})
    assert api is not None
    assert (api.status_code, api.data) == (status, {"detail": error.message})

    @domain_errors
    def page(request):
        raise error

    request = rf.post("/", HTTP_HX_REQUEST="true")
    request.htmx = HtmxDetails(request)
    answer = page(request)
    assert answer.status_code == status
    assert escape(error.message) in answer.content.decode()


def test_a_missing_files_message_names_it():
    assert "'a.txt'" in FileNotFoundInWorkspace("a.txt").message


@pytest.mark.django_db(transaction=True)
def test_a_branch_restored_from_a_turns_writes_goes_with_them_when_the_turn_fails(session):
    """A restore from a checkpoint taken while a turn wrote forks a branch that shows those
    writes; when the turn fails they are deleted, and so are that checkpoint and that branch
    (the turn's branch is current again): nothing kept shows other files than it did."""
    from checkpoints.models import Checkpoint
    from checkpoints.services import checkpoint_create, checkpoint_restore
    from sessions_app.models import Branch
    from sessions_app.selectors import current_branch
    from sessions_app.turns import turn_claim, turn_fail, turn_start

    branch = current_branch(session)
    file_write(branch=branch, path="kept.md", content="mine")
    early = checkpoint_create(branch=branch, name="early")
    turn = turn_claim(turn_id=turn_start(session=session, message="go").pk)
    assert turn is not None
    file_write(branch=branch, path="notes.md", content="half done", turn=turn, by="agent")
    held = checkpoint_create(branch=branch, name="held")
    forked = checkpoint_restore(checkpoint=held, session=session, mode="branch").branch
    assert paths(forked) == ["kept.md", "notes.md"]

    assert turn_fail(turn=turn, error="the model failed")
    assert not Branch.objects.filter(pk=forked.pk).exists()
    assert not Checkpoint.objects.filter(pk=held.pk).exists()
    assert current_branch(session).pk == branch.pk
    assert paths(branch) == ["kept.md"]
    assert [f.path for f in workspace_files(branch, mark=early.files_mark)] == ["kept.md"]
