"""The workspace through export and import: every version in order, each content once, and the
marks of checkpoints and branches rebuilt so that each workspace reads the same in the copy. A
document with bad files is refused whole; an export from before the workspace still imports."""

from __future__ import annotations

import copy
import json

import pytest

from checkpoints.models import Checkpoint
from checkpoints.selectors import checkpoint_files
from checkpoints.services import checkpoint_create, checkpoint_restore
from checkpoints.transfer import session_export, session_import
from sessions_app.errors import ImportRejected, ImportTooLarge
from sessions_app.models import Branch, Message, Session
from sessions_app.services import message_append
from tests.conftest import say
from workspace.models import FileVersion, WorkspaceBlob
from workspace.selectors import workspace_files
from workspace.services import file_delete, file_write
from workspace.validation import sha256_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def filed_session(session, branch):
    """Two branches with files: a checkpoint, later writes and a deletion on the first branch,
    a restore as a branch that writes its own file, a content shared by two paths."""
    say(branch, "write some files", "done")
    file_write(branch=branch, path="a.txt", content="one")
    file_write(branch=branch, path="notes/x.md", content="# x")
    checkpoint_create(branch=branch, name="first")
    say(branch, "change them", "changed")
    file_write(branch=branch, path="a.txt", content="two")
    file_delete(branch=branch, path="notes/x.md")
    file_write(branch=branch, path="b.txt", content="one")
    restored = checkpoint_restore(checkpoint=Checkpoint.objects.get(checkpoint_name="first"))
    side = restored.branch
    file_write(branch=side, path="side/c.txt", content="on the side")
    checkpoint_create(branch=side, name="side")
    file_write(branch=side, path="side/c.txt", content="later on the side")
    file_write(branch=branch, path="d.txt", content="after the fork", by="api")
    return session


def _files(session: Session) -> dict:
    """Every workspace of the session, by branch order and checkpoint name: what a copy keeps."""
    branches = Branch.objects.filter(session=session).order_by("created_at", "id")
    checkpoints = Checkpoint.objects.filter(branch__session=session).order_by("id")
    return {
        "branches": [[(f.path, f.sha256) for f in workspace_files(b)] for b in branches],
        "checkpoints": {
            c.checkpoint_name: [(f.path, f.sha256) for f in checkpoint_files(c)]
            for c in checkpoints
        },
    }


def _import(doc: dict, owner) -> Session:
    return session_import(owner=owner, raw=json.dumps(doc))


def test_export_then_import_gives_the_same_workspaces_everywhere(filed_session, bob):
    copied = _import(session_export(session=filed_session), bob)

    assert _files(copied) == _files(filed_session)
    expected = _files(filed_session)
    assert [p for p, _ in expected["branches"][0]] == ["a.txt", "b.txt", "d.txt"]
    assert [p for p, _ in expected["checkpoints"]["first"]] == ["a.txt", "notes/x.md"]
    assert [p for p, _ in expected["branches"][1]] == ["a.txt", "notes/x.md", "side/c.txt"]
    assert WorkspaceBlob.objects.filter(session=copied).count() == 6  # "one" stored once


def test_the_export_lists_versions_in_order_and_each_content_once(filed_session):
    doc = session_export(session=filed_session)

    versions = doc["files"]["versions"]
    assert [(v["path"], v["sha256"] is None) for v in versions[:5]] == [
        ("a.txt", False),
        ("notes/x.md", False),
        ("a.txt", False),
        ("notes/x.md", True),
        ("b.txt", False),
    ]
    assert versions[-1]["by"] == "api"
    assert sorted(doc["files"]["blobs"]) == sorted({v["sha256"] for v in versions} - {None})
    for sha, content in doc["files"]["blobs"].items():
        assert sha256_of(content) == sha
    first = doc["branches"][0]["checkpoints"][0]
    assert first["files_upto"] == 2
    assert doc["branches"][1]["fork_files_upto"] == 2


def test_an_imported_checkpoint_restores_its_files_and_later_writes_stay_out(filed_session, bob):
    copied = _import(session_export(session=filed_session), bob)
    root = Branch.objects.get(session=copied, parent=None)
    file_write(branch=root, path="new.txt", content="written after the import")
    first = Checkpoint.objects.get(branch__session=copied, checkpoint_name="first")

    restored = checkpoint_restore(checkpoint=first, mode="rewind").branch

    assert [(f.path) for f in workspace_files(restored)] == ["a.txt", "notes/x.md"]


def test_an_export_from_before_the_workspace_still_imports(filed_session, bob):
    doc = session_export(session=filed_session)
    del doc["files"]
    for b in doc["branches"]:
        del b["fork_files_upto"]
        for c in b["checkpoints"]:
            del c["files_upto"]

    copied = _import(doc, bob)

    assert _files(copied)["branches"] == [[], []]
    assert not FileVersion.objects.filter(branch__session=copied).exists()


def _blob(doc: dict, content: str) -> str:
    sha = sha256_of(content)
    doc["files"]["blobs"][sha] = content
    return sha


def _add_version(doc: dict, path: str, content: str) -> None:
    doc["files"]["versions"].append(
        {
            "branch": doc["branches"][0]["id"],
            "path": path,
            "position": 0,
            "sha256": _blob(doc, content),
        }
    )


def _bad_path_dotdot(doc):
    doc["files"]["versions"][0]["path"] = "../escape.txt"


def _bad_path_absolute(doc):
    doc["files"]["versions"][0]["path"] = "/etc/passwd"


def _bad_path_nul(doc):
    doc["files"]["versions"][0]["path"] = "a\x00.txt"


def _bad_path_long(doc):
    doc["files"]["versions"][0]["path"] = "a" * 300


def _bad_path_unclean(doc):
    doc["files"]["versions"][0]["path"] = "./a.txt"


def _binary(doc):
    doc["files"]["blobs"][sha256_of("\x00bin")] = "\x00bin"
    doc["files"]["versions"][0]["sha256"] = sha256_of("\x00bin")


def _sha_mismatch(doc):
    sha = doc["files"]["versions"][0]["sha256"]
    doc["files"]["blobs"][sha] = "not what the hash says"


def _unknown_sha(doc):
    doc["files"]["versions"][0]["sha256"] = "f" * 64


def _unused_blob(doc):
    _blob(doc, "nobody uses me")


def _unknown_branch(doc):
    doc["files"]["versions"][0]["branch"] = 999_999


def _position_past_the_branch(doc):
    doc["files"]["versions"][0]["position"] = 10_000


def _mark_past_the_versions(doc):
    doc["branches"][0]["checkpoints"][0]["files_upto"] = 10_000


def _fork_mark_negative(doc):
    doc["branches"][1]["fork_files_upto"] = -1


def _file_and_folder(doc):
    _add_version(doc, "a.txt/inside.txt", "clash")


@pytest.mark.parametrize(
    "break_it",
    [
        _bad_path_dotdot,
        _bad_path_absolute,
        _bad_path_nul,
        _bad_path_long,
        _bad_path_unclean,
        _binary,
        _sha_mismatch,
        _unknown_sha,
        _unused_blob,
        _unknown_branch,
        _position_past_the_branch,
        _mark_past_the_versions,
        _fork_mark_negative,
        _file_and_folder,
    ],
)
def test_an_import_with_bad_files_is_refused_and_nothing_written(filed_session, bob, break_it):
    doc = copy.deepcopy(session_export(session=filed_session))
    break_it(doc)
    versions, blobs = FileVersion.objects.count(), WorkspaceBlob.objects.count()

    with pytest.raises(ImportRejected) as refused:
        _import(doc, bob)

    assert "import" in refused.value.message.lower() or "export" in refused.value.message.lower()
    assert not Session.objects.filter(owner=bob).exists()
    assert (FileVersion.objects.count(), WorkspaceBlob.objects.count()) == (versions, blobs)


def test_an_import_with_a_file_over_the_size_limit_is_too_large(filed_session, bob, settings):
    doc = session_export(session=filed_session)
    settings.WORKSPACE_MAX_FILE_BYTES = 10
    _add_version(doc, "big.txt", "x" * 11)

    with pytest.raises(ImportTooLarge):
        _import(doc, bob)
    assert not Session.objects.filter(owner=bob).exists()


def test_an_import_whose_workspace_has_too_many_files_is_too_large(filed_session, bob, settings):
    doc = session_export(session=filed_session)
    settings.WORKSPACE_MAX_FILES = 3  # the first branch holds 3; the side branch 3

    _import(doc, bob)
    _add_version(doc, "one-more.txt", "four")
    with pytest.raises(ImportTooLarge, match="WORKSPACE_MAX_FILES"):
        _import(doc, bob)
    assert Session.objects.filter(owner=bob).count() == 1


def test_a_tool_messages_effect_survives_export_and_import(session, branch, bob):
    say(branch, "send the mail")
    sent = message_append(
        branch=branch, role="tool", content="sent", tool_name="mail__send", tool_result="sent"
    )
    Message.objects.filter(pk=sent.pk).update(effect="external")
    doc = session_export(session=session)

    copied = _import(doc, bob)

    assert doc["branches"][0]["messages"][1]["effect"] == "external"
    effects = Message.objects.filter(branch__session=copied).order_by("position")
    assert [m.effect for m in effects] == ["", "external"]


def test_an_import_with_an_unknown_effect_is_refused(session, branch, bob):
    say(branch, "hello")
    doc = session_export(session=session)
    doc["branches"][0]["messages"][0]["effect"] = "explosive"

    with pytest.raises(ImportRejected):
        _import(doc, bob)


def _chain(doc: dict, depth: int) -> None:
    """`depth` more branches, each forked from the one before at its end, each writing a file."""
    parent = doc["branches"][-1]
    length = parent["fork_position"] + len(parent["messages"])
    for level in range(depth):
        branch_id = 10_000 + level
        doc["branches"].append(
            {
                "id": branch_id,
                "parent": parent["id"],
                "fork_position": length,
                "fork_files_upto": len(doc["files"]["versions"]),
            }
        )
        sha = _blob(doc, f"level {level}")
        doc["files"]["versions"].append(
            {"branch": branch_id, "path": f"level{level:04}.txt", "position": length, "sha256": sha}
        )
        parent = doc["branches"][-1]


def test_an_import_counts_files_along_a_deep_lineage(session, branch, bob, settings):
    file_write(branch=branch, path="root.txt", content="root")
    doc = session_export(session=session)
    _chain(doc, 1500)  # deeper than Python's recursion limit
    settings.WORKSPACE_MAX_FILES = 1501

    copied = _import(doc, bob)

    deepest = Branch.objects.filter(session=copied).order_by("-id").first()
    assert len(workspace_files(deepest)) == 1501
    settings.WORKSPACE_MAX_FILES = 1500
    with pytest.raises(ImportTooLarge):
        _import(doc, bob)
