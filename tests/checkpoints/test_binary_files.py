"""Binary files (an image, a PDF, a compiled file) through the checkpoints' features: compare
says what changed without a line diff ("changed (12 kB → 14 kB)"), export carries the bytes in
base64 and import brings them back byte for byte, a bad base64 or a wrong hash is refused
writing nothing, and a restore brings a binary file back like a text one."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from checkpoints.compare import session_diff
from checkpoints.services import checkpoint_create, checkpoint_restore
from checkpoints.transfer import session_export, session_import
from sessions_app.errors import ImportRejected
from sessions_app.models import Session
from sessions_app.selectors import current_branch
from workspace.selectors import workspace_file_bytes, workspace_files
from workspace.services import file_write

pytestmark = pytest.mark.django_db

SMALL, LARGER = b"\x89PNG\x00" + b"\x01" * 11_995, b"\x89PNG\x00" + b"\x02" * 13_995


def test_compare_names_a_binary_change_by_its_sizes_and_diffs_the_text_beside_it(session, branch):
    file_write(branch=branch, path="img.png", content=SMALL)
    file_write(branch=branch, path="a.txt", content="one\n")
    before = checkpoint_create(branch=branch, name="before")
    file_write(branch=branch, path="img.png", content=LARGER)
    file_write(branch=branch, path="a.txt", content="two\n")
    file_write(branch=branch, path="new.bin", content=b"\x00\xff")
    diff = session_diff(session, f"checkpoint:{before.pk}", f"branch:{branch.pk}")
    changed = {f.path: f for f in diff.files.changed}
    assert changed["img.png"].note == "binary file changed (12 kB → 14 kB)"
    assert changed["img.png"].diff == ""
    assert "-one\n+two\n" in changed["a.txt"].diff
    (added,) = diff.files.added
    assert (added.path, added.note) == ("new.bin", "binary file added (2 bytes)")


def test_export_and_import_carry_binary_files_byte_for_byte(session, branch, bob):
    file_write(branch=branch, path="img.png", content=SMALL)
    file_write(branch=branch, path="notes.md", content="# notes")
    doc = session_export(session=session)
    encoded = doc["files"]["blobs"][hashlib.sha256(SMALL).hexdigest()]
    assert encoded == {"base64": base64.b64encode(SMALL).decode()}
    copy = session_import(owner=bob, raw=json.dumps(doc))
    found, content = workspace_file_bytes(current_branch(copy), "img.png")
    assert (found.binary, content.raw) == (True, SMALL)
    assert workspace_file_bytes(current_branch(copy), "notes.md")[1].text == "# notes"


@pytest.mark.parametrize(
    ("blob", "words"),
    [({"base64": "not base64!"}, "base64"), ({"base64": base64.b64encode(b"x").decode()}, "SHA")],
)
def test_an_import_with_a_bad_binary_content_is_refused_writing_nothing(
    session, branch, bob, blob, words
):
    file_write(branch=branch, path="img.png", content=SMALL)
    doc = session_export(session=session)
    doc["files"]["blobs"][hashlib.sha256(SMALL).hexdigest()] = blob
    with pytest.raises(ImportRejected, match=words):
        session_import(owner=bob, raw=json.dumps(doc))
    assert not Session.objects.filter(owner=bob).exists()


def test_a_restore_brings_a_binary_file_back(session, branch):
    file_write(branch=branch, path="img.png", content=SMALL)
    checkpoint = checkpoint_create(branch=branch, name="small")
    file_write(branch=branch, path="img.png", content=LARGER)
    restored = checkpoint_restore(checkpoint=checkpoint).branch
    assert workspace_file_bytes(restored, "img.png")[1].raw == SMALL
    assert [f.binary for f in workspace_files(restored)] == [True]
