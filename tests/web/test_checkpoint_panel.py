"""The chat page's side panel with many checkpoints: the branch tree first, the newest
checkpoints a page at a time, a filter that survives live updates, unique names."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_restore
from tests.conftest import say

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def _ids(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'data-checkpoint-id="(\d+)"', html)]


def _list(client, session, **params):
    return client.get(reverse("chat:checkpoint_list", args=[session.pk]), params, **HX)


@pytest.fixture
def many(session, branch):
    """151 checkpoints on main, every third one manual (the first), the others automatic."""
    made = []
    for i in range(151):
        say(branch, f"m{i}")
        made.append(checkpoint_create(branch=branch, name=f"after-{i}", is_auto=i % 3 != 0))
    return made


def test_the_page_shows_the_tree_first_and_only_the_newest_checkpoints(as_alice, session, many):
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    panel = page[page.index('id="side-panel"') :]
    assert panel.index('id="branch-tree"') < panel.index('id="checkpoint-list"')
    newest = [cp.pk for cp in reversed(many)][:20]
    assert _ids(panel) == newest
    assert 'data-testid="show-older"' in panel
    assert f"before={newest[-1]}" in panel
    assert 'data-testid="checkpoint-total">151<' in panel
    assert 'id="checkpoint-shown" name="shown" value="20"' in panel


def test_show_older_pages_through_every_checkpoint_once(as_alice, session, many):
    seen: list[int] = []
    params: dict[str, object] = {}
    while True:
        html = _list(as_alice, session, **params).content.decode()
        seen += _ids(html)
        more = re.search(r"before=(\d+)&amp;shown=(\d+)", html)
        if more is None:
            break
        params = {"before": more[1], "shown": more[2]}
    assert seen == [cp.pk for cp in reversed(many)]
    assert 'id="checkpoint-shown" name="shown" value="151" hx-swap-oob="true"' in html


def test_a_live_update_lists_as_many_as_the_reader_had_loaded(as_alice, session, many):
    html = _list(as_alice, session, shown=45).content.decode()
    assert len(_ids(html)) == 45
    assert 'value="45"' in html


def test_the_filter_by_kind(as_alice, session, many):
    manual = _ids(_list(as_alice, session, kind="manual", shown=100).content.decode())
    assert manual == [cp.pk for cp in reversed(many) if not cp.is_auto]
    auto = _ids(_list(as_alice, session, kind="auto").content.decode())
    assert auto == [cp.pk for cp in reversed(many) if cp.is_auto][:20]


def test_the_filter_by_branch_lists_the_current_line(as_alice, session, branch):
    say(branch, "a")
    early = checkpoint_create(branch=branch, name="early")
    say(branch, "b")
    late = checkpoint_create(branch=branch, name="late")
    new = checkpoint_restore(checkpoint=early).branch
    say(new, "c")
    mine = checkpoint_create(branch=new, name="mine")
    assert _ids(_list(as_alice, session, scope="branch").content.decode()) == [mine.pk, early.pk]
    everything = _ids(_list(as_alice, session, scope="all").content.decode())
    assert everything == [mine.pk, late.pk, early.pk]


def test_an_empty_filter_says_so(as_alice, session, branch):
    checkpoint_create(branch=branch, name="mine")
    html = _list(as_alice, session, kind="auto").content.decode()
    assert "No checkpoints match this filter." in html


@pytest.mark.parametrize(
    "params",
    [{"kind": "sideways"}, {"scope": "galaxy"}, {"before": "x"}, {"shown": "-1"}],
)
def test_a_bad_list_request_is_a_clear_400(as_alice, session, branch, params):
    response = _list(as_alice, session, **params)
    assert response.status_code == 400
    assert response["HX-Retarget"] == "#notices"


def test_bob_cannot_list_alices_checkpoints(client, bob, session, branch):
    checkpoint_create(branch=branch, name="secret")
    client.force_login(bob)
    response = _list(client, session)
    assert response.status_code == 404
    assert "secret" not in response.content.decode()


def test_saving_under_a_taken_name_says_the_name_it_got(as_alice, session, branch):
    url = reverse("chat:checkpoint_save", args=[session.pk])
    as_alice.post(url, {"name": "dup"}, **HX)
    body = as_alice.post(url, {"name": "dup"}, **HX).content.decode()
    assert "Saved “dup (2)”." in body
    assert sorted(Checkpoint.objects.values_list("checkpoint_name", flat=True)) == [
        "dup",
        "dup (2)",
    ]


def test_the_api_gives_a_taken_name_a_number_too(client, alice, session, branch):
    client.force_login(alice)
    url = f"/api/v1/sessions/{session.pk}/checkpoints/"
    client.post(url, {"name": "dup"}, content_type="application/json")
    response = client.post(url, {"name": "dup"}, content_type="application/json")
    assert response.status_code == 201
    assert response.json()["name"] == "dup (2)"
