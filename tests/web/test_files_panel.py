"""The chat page's Files panel: the current branch's tree, a file's highlighted (and escaped)
view, download as a text attachment, upload (all or nothing, with the workspace's limits shown
in the panel), delete; live updates fetch only the tree; the restore dialog says which files come
back and what it cannot undo; bob gets a 404 on every view of alice's."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from checkpoints.services import checkpoint_create
from tests.conftest import external_call, say
from web.ws.consumers import render_event
from workspace.models import FileVersion
from workspace.selectors import workspace_files
from workspace.services import file_write

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def files(branch):
    file_write(branch=branch, path="src/app.py", content="def main():\n    return 1\n")
    file_write(branch=branch, path="src/lib/util.py", content="X = 1\n")
    file_write(branch=branch, path="README.md", content="# Hello\n")
    return branch


def _paths(branch) -> list[str]:
    return [f.path for f in workspace_files(branch)]


def test_the_chat_page_holds_the_panel_with_its_tree(as_alice, session, files):
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    panel = page[page.index('id="side-panel"') :]
    assert 'data-testid="files-panel"' in panel
    assert 'data-path="README.md"' in panel  # rendered with the page: nothing left to fetch
    assert 'data-testid="files-upload"' in panel


def test_the_panel_shows_a_tree_of_folders_first_with_sizes(as_alice, session, files):
    html = as_alice.get(reverse("chat:files_panel", args=[session.pk]), **HX).content.decode()
    assert 'data-testid="files-count">3<' in html
    # Folders first, then files; nested as in the paths.
    assert html.index('data-path="src"') < html.index('data-path="README.md"')
    assert html.index('data-path="src/lib"') < html.index('data-path="src/app.py"')
    assert "2 files" in html  # src holds two files, at any depth
    assert "8\xa0bytes" in html  # README.md's size
    assert "data-keep-open" in html
    assert 'data-testid="files-upload"' in html
    assert "256.0\xa0KB" in html  # the limits, shown by the form


def test_an_empty_workspace_says_so(as_alice, session):
    html = as_alice.get(reverse("chat:files_tree", args=[session.pk]), **HX).content.decode()
    assert 'data-testid="files-empty"' in html
    assert 'id="files-count" data-testid="files-count" hx-swap-oob="true">0<' in html


def test_a_file_view_is_highlighted_by_its_name(as_alice, session, files):
    url = reverse("chat:file_view", args=[session.pk, "src/app.py"])
    html = as_alice.get(url, **HX).content.decode()
    assert '<span class="k">def</span>' in html
    assert "Python" in html
    assert reverse("chat:file_download", args=[session.pk, "src/app.py"]) in html
    assert 'data-testid="file-delete"' in html


def test_highlighting_escapes_the_files_markup(as_alice, session, branch):
    evil = "<script>alert('x')</script>\n<img src=x onerror=alert(1)>\n"
    for name in ("page.html", "notes.unknownext", "noext"):
        file_write(branch=branch, path=name, content=evil)
        url = reverse("chat:file_view", args=[session.pk, name])
        html = as_alice.get(url, **HX).content.decode()
        assert "<script>" not in html
        assert "<img" not in html
        assert "&lt;" in html


def test_an_unknown_kind_of_file_is_shown_as_plain_text(as_alice, session, branch):
    file_write(branch=branch, path="data.zzz", content="a < b & c\n")
    html = as_alice.get(reverse("chat:file_view", args=[session.pk, "data.zzz"]), **HX)
    text = html.content.decode()
    assert "plain text" in text
    assert "a &lt; b &amp; c" in text


def test_a_path_with_odd_characters_is_linked_and_opened(as_alice, session, branch):
    file_write(branch=branch, path="a dir/q?#%.txt", content="odd")
    tree = as_alice.get(reverse("chat:files_tree", args=[session.pk]), **HX).content.decode()
    url = reverse("chat:file_view", args=[session.pk, "a dir/q?#%.txt"])
    assert url.endswith("/a%20dir/q%3F%23%25.txt")
    assert url in tree
    assert as_alice.get(url, **HX).status_code == 200


def test_download_is_a_text_attachment(as_alice, session, files):
    response = as_alice.get(reverse("chat:file_download", args=[session.pk, "src/app.py"]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="app.py"')
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.content == b"def main():\n    return 1\n"


def test_download_of_an_html_file_is_still_plain_text_with_a_safe_name(as_alice, session, branch):
    file_write(branch=branch, path='x/é "q".html', content="<script>1</script>")
    response = as_alice.get(reverse("chat:file_download", args=[session.pk, 'x/é "q".html']))
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    disposition = response["Content-Disposition"]
    assert 'filename=" q.html"' in disposition
    assert "filename*=UTF-8''%C3%A9%20%22q%22.html" in disposition


def test_upload_writes_text_files_into_a_folder(as_alice, session, branch):
    uploads = [
        SimpleUploadedFile("a.txt", b"alpha\n", content_type="text/plain"),
        SimpleUploadedFile("b.py", "print('é')\n".encode(), content_type="text/x-python"),
    ]
    response = as_alice.post(
        reverse("chat:files_upload", args=[session.pk]),
        {"folder": "docs/new", "files": uploads},
        **HX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="upload-done"' in html
    assert "Uploaded 2 files" in html
    # The tree as it now is comes with the answer: nothing is fetched again.
    assert 'id="files-reload"' not in html
    assert 'data-path="docs/new/a.txt"' in html
    assert _paths(branch) == ["docs/new/a.txt", "docs/new/b.py"]
    assert FileVersion.objects.filter(metadata__by="user").count() == 2


@pytest.mark.parametrize(
    ("name", "content", "folder", "status", "words"),
    [
        ("ok.txt", b"fine", "../up", 400, ".."),
        ("ok.txt", b"fine", "/abs", 400, "absolute"),
        ("big.txt", b"x" * 300_000, "", 413, "may hold at most 262,144 bytes. Nothing"),
    ],
)
def test_a_bad_upload_writes_nothing_and_says_why_in_the_panel(
    as_alice, session, branch, name, content, folder, status, words
):
    uploads = [
        SimpleUploadedFile("first.txt", b"good one"),
        SimpleUploadedFile(name, content),
    ]
    response = as_alice.post(
        reverse("chat:files_upload", args=[session.pk]),
        {"folder": folder, "files": uploads},
        **HX,
    )
    assert response.status_code == status
    html = response.content.decode()
    assert 'data-testid="upload-error"' in html
    assert words in html.replace("&#x27;", "'")
    assert "WORKSPACE_MAX_FILE_BYTES" not in html  # a setting's name is the operator's
    assert not FileVersion.objects.exists()


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f80f000001010000b9f3b2f00000000049454e44ae426082"
)


def test_binary_files_upload_and_an_image_is_shown_the_rest_offered_to_download(
    as_alice, session, branch
):
    uploads = [
        SimpleUploadedFile("dot.png", PNG, content_type="image/png"),
        SimpleUploadedFile("blob.bin", b"\x00\x01\xff", content_type="application/x-bin"),
        SimpleUploadedFile("draw.svg", b"<svg onload='alert(1)'/>", content_type="image/svg+xml"),
    ]
    response = as_alice.post(
        reverse("chat:files_upload", args=[session.pk]), {"folder": "", "files": uploads}, **HX
    )
    assert response.status_code == 200
    assert "Uploaded 3 files" in response.content.decode()

    view = as_alice.get(reverse("chat:file_view", args=[session.pk, "dot.png"]), **HX)
    image_url = reverse("chat:file_image", args=[session.pk, "dot.png"])
    assert f'src="{image_url}"' in view.content.decode()
    image = as_alice.get(image_url)
    assert (image["Content-Type"], image.content) == ("image/png", PNG)
    assert image["Content-Disposition"].startswith("inline;")
    assert image["X-Content-Type-Options"] == "nosniff"

    other = as_alice.get(reverse("chat:file_view", args=[session.pk, "blob.bin"]), **HX)
    assert 'data-testid="file-binary"' in other.content.decode()
    download = as_alice.get(reverse("chat:file_download", args=[session.pk, "blob.bin"]))
    assert download.content == b"\x00\x01\xff"
    assert download["Content-Disposition"].startswith("attachment;")
    # Neither text nor another type is ever shown inline: an SVG is text, and a binary file
    # that is no image is not an image.
    for path in ("draw.svg", "blob.bin"):
        url = reverse("chat:file_image", args=[session.pk, path])
        assert as_alice.get(url).status_code == 404


def test_an_upload_past_the_file_limit_writes_none_of_its_files(
    as_alice, session, branch, settings
):
    settings.WORKSPACE_MAX_FILES = 2
    file_write(branch=branch, path="kept.txt", content="k")
    uploads = [SimpleUploadedFile("a.txt", b"a"), SimpleUploadedFile("b.txt", b"b")]
    response = as_alice.post(
        reverse("chat:files_upload", args=[session.pk]), {"files": uploads}, **HX
    )
    assert response.status_code == 413
    refusal = response.content.decode()
    assert "files, the most it may: delete one first. Nothing was written." in refusal
    assert "WORKSPACE_MAX_FILES" not in refusal  # a setting's name is the operator's
    assert _paths(branch) == ["kept.txt"]


def test_an_upload_without_files_is_refused(as_alice, session):
    response = as_alice.post(reverse("chat:files_upload", args=[session.pk]), {}, **HX)
    assert response.status_code == 400
    assert "Choose one or more" in response.content.decode()


def test_delete_removes_the_file_and_refreshes_the_tree(as_alice, session, files):
    url = reverse("chat:file_delete", args=[session.pk, "src/app.py"])
    response = as_alice.post(url, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="file-gone"' in html
    assert 'id="files-reload"' not in html
    assert 'data-path="src/lib"' in html
    assert 'data-path="src/app.py"' not in html
    assert "src/app.py" not in _paths(files)
    assert as_alice.post(url, **HX).status_code == 404


def test_a_delete_by_get_is_not_allowed(as_alice, session, files):
    url = reverse("chat:file_delete", args=[session.pk, "src/app.py"])
    assert as_alice.get(url).status_code == 405
    assert "src/app.py" in _paths(files)


def test_bob_gets_404_from_every_view_of_alices_files(client, bob, session, files):
    client.force_login(bob)
    gets = [
        reverse("chat:files_panel", args=[session.pk]),
        reverse("chat:files_tree", args=[session.pk]),
        reverse("chat:file_view", args=[session.pk, "README.md"]),
        reverse("chat:file_download", args=[session.pk, "README.md"]),
    ]
    for url in gets:
        assert client.get(url).status_code == 404, url
        assert client.get(url, **HX).status_code == 404, url
    posts = [
        reverse("chat:file_delete", args=[session.pk, "README.md"]),
        reverse("chat:files_upload", args=[session.pk]),
    ]
    for url in posts:
        response = client.post(url, {"files": [SimpleUploadedFile("x.txt", b"x")]}, **HX)
        assert response.status_code == 404, url
    assert len(_paths(files)) == 3


def test_a_workspace_change_on_the_socket_fetches_only_the_tree(session):
    html = render_event(
        session, {"type": "workspace.changed", "session": session.pk, "branch": 1, "paths": []}
    )
    assert 'id="files-reload"' in html
    assert reverse("chat:files_tree", args=[session.pk]) in html
    assert "messages" not in html


def test_a_branch_change_refreshes_the_tree_too(as_alice, session, files):
    html = as_alice.get(reverse("chat:refresh", args=[session.pk]), **HX).content.decode()
    # The refresh carries the tree itself (one request): no second fetch.
    assert 'id="files-reload"' not in html
    assert 'id="files-tree"' in html
    assert 'data-path="README.md"' in html


def test_the_restore_dialog_says_which_files_come_back(as_alice, session, branch):
    file_write(branch=branch, path="kept.txt", content="v1")
    file_write(branch=branch, path="gone.txt", content="old")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    file_write(branch=branch, path="kept.txt", content="v2")
    file_write(branch=branch, path="new.txt", content="new")
    from workspace.services import file_delete

    file_delete(branch=branch, path="gone.txt")
    url = reverse("chat:checkpoint_restore", args=[checkpoint.pk])
    html = as_alice.get(url, **HX).content.decode()
    assert "brings back <code>gone.txt</code>" in html
    assert "removes <code>new.txt</code>" in html
    assert "restores the earlier version of <code>kept.txt</code>" in html
    assert 'data-testid="restore-irreversible"' not in html


def test_the_restore_dialog_is_short_when_nothing_changes(as_alice, session, branch):
    say(branch, "hi", "hello")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    html = as_alice.get(reverse("chat:checkpoint_restore", args=[checkpoint.pk]), **HX)
    text = html.content.decode()
    assert 'data-testid="restore-files"' not in text
    assert 'data-testid="restore-irreversible"' not in text


def test_the_restore_dialog_lists_the_external_effects_it_cannot_undo(as_alice, session, branch):
    say(branch, "hi", "hello")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    external_call(branch, "send_email", "<b>sent</b> to bob")
    html = as_alice.get(reverse("chat:checkpoint_restore", args=[checkpoint.pk]), **HX)
    text = html.content.decode()
    assert 'data-testid="restore-irreversible"' in text
    assert "<code>send_email</code>" in text
    assert "&lt;b&gt;sent&lt;/b&gt;" in text  # a tool's result is untrusted text
    assert "No restore can undo" in text  # the same in both modes here
    assert 'data-testid="irreversible-rewind"' not in text


def test_a_tree_update_tells_an_open_view_its_file_changed_or_went(as_alice, session, files):
    url = reverse("chat:files_tree", args=[session.pk])
    sha = workspace_files(files, path="README.md")[0].sha256
    same = as_alice.get(url, {"open": "README.md", "open_sha": sha}, **HX).content.decode()
    assert 'id="file-stale" hx-swap-oob="true"></div>' in same
    file_write(branch=files, path="README.md", content="# Changed\n")
    changed = as_alice.get(url, {"open": "README.md", "open_sha": sha}, **HX).content.decode()
    assert "This file changed since you opened it." in changed
    assert reverse("chat:file_view", args=[session.pk, "README.md"]) in changed
    from workspace.services import file_delete

    file_delete(branch=files, path="README.md")
    gone = as_alice.get(url, {"open": "README.md", "open_sha": sha}, **HX).content.decode()
    assert "This file was deleted since you opened it." in gone
    plain = as_alice.get(url, **HX).content.decode()
    assert "file-stale" not in plain


def test_the_restore_dialog_lists_per_mode_when_the_modes_leave_different_effects(
    as_alice, session, branch
):
    from checkpoints.services import checkpoint_restore

    say(branch, "hi", "hello")
    early = checkpoint_create(branch=branch, name="early")
    say(branch, "more", "ok")
    late = checkpoint_create(branch=branch, name="late")
    external_call(branch, "post_main", "x")
    # Continue from "late" on a new branch, and do something external there.
    forked = checkpoint_restore(checkpoint=late, mode="branch", session=session).branch
    external_call(forked, "post_fork", "y")
    html = as_alice.get(reverse("chat:checkpoint_restore", args=[early.pk]), **HX)
    text = html.content.decode()
    assert "As a new branch, it leaves behind" in text
    branch_part, rewind_part = text.split('data-testid="irreversible-rewind"')
    assert "post_fork" in branch_part
    assert "post_main" not in branch_part
    assert "post_main" in rewind_part
