"""Groups from the provider (OIDC_GROUPS_CLAIM, issue 40 item 1), against the real provider: each
sign-in through it makes the person's groups exactly the existing groups its claim names (a new
account's and a returning one's), never makes a group, clears them when the claim is absent and
leaves them to the admin while the setting is unset. A claim that is not names, or of more than
1,000, refuses the sign-in saying so, with nothing written; staff and superuser flags are never
touched, and a group name with markup shows as text."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from accounts.models import SsoIdentity, User

from .conftest import PASSWORD, come_back, provider_answer, signed_in_as, start, text

pytestmark = pytest.mark.django_db

NOT_NAMES = "sent your groups (its claim 'groups') as something other than a list of names"


@pytest.fixture
def groups_sso(sso, settings, admin_user):
    """Single sign-on with OIDC_GROUPS_CLAIM=groups; an administrator already there (so the
    people signing up are not the site's first account), and three groups they made."""
    settings.OIDC_GROUPS_CLAIM = "groups"
    for name in ("analysts", "reviewers", "Admins"):
        Group.objects.create(name=name)
    return sso


def sign_in(client, provider, username: str):
    """A whole sign-in through the provider as `username`; Rollback's answer to the callback."""
    client.logout()
    return come_back(client, provider_answer(start(client), username))


def groups_of(user: User) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_a_sign_up_gets_the_groups_the_claim_names_and_no_group_is_made(client, groups_sso):
    groups_sso.add_user("ana", PASSWORD)
    groups_sso.set_claims("ana", groups=["analysts", "no-such-group", "ANALYSTS", "admins"])
    made_before = Group.objects.count()
    answer = sign_in(client, groups_sso, "ana")
    assert answer.status_code == 302
    user = signed_in_as(client)
    assert user is not None
    assert user.username == "ana"
    assert groups_of(user) == {"analysts"}  # exact names only: not "ANALYSTS", not "admins"
    assert Group.objects.count() == made_before


def test_a_later_sign_in_adds_and_removes_groups(client, groups_sso):
    groups_sso.add_user("ben", PASSWORD)
    groups_sso.set_claims("ben", groups=["analysts"])
    sign_in(client, groups_sso, "ben")
    user = User.objects.get(username="ben")
    assert groups_of(user) == {"analysts"}
    groups_sso.set_claims("ben", groups=["reviewers", "Admins"])
    sign_in(client, groups_sso, "ben")
    assert signed_in_as(client) == user
    assert groups_of(user) == {"reviewers", "Admins"}


def test_the_providers_own_groups_claim_and_one_name_alone_are_read(client, groups_sso):
    """The provider's `groups` claim as it makes it (its own groups of the person), and a claim
    of a single name rather than a list."""
    groups_sso.add_user("cleo", PASSWORD, groups=("reviewers", "elsewhere"))
    sign_in(client, groups_sso, "cleo")
    user = User.objects.get(username="cleo")
    assert groups_of(user) == {"reviewers"}
    groups_sso.set_claims("cleo", groups="analysts")
    sign_in(client, groups_sso, "cleo")
    assert groups_of(user) == {"analysts"}


def test_an_absent_claim_means_no_groups(client, groups_sso):
    groups_sso.add_user("dov", PASSWORD)
    groups_sso.set_claims("dov", groups=["analysts", "reviewers"])
    sign_in(client, groups_sso, "dov")
    user = User.objects.get(username="dov")
    assert groups_of(user) == {"analysts", "reviewers"}
    groups_sso.set_claims("dov", drop=("groups",))
    assert sign_in(client, groups_sso, "dov").status_code == 302
    assert signed_in_as(client) == user
    assert groups_of(user) == set()


def test_the_named_claim_is_read_and_no_other(client, groups_sso, settings):
    settings.OIDC_GROUPS_CLAIM = "https://rollback.example/teams"
    groups_sso.add_user("eli", PASSWORD)
    groups_sso.set_claims(
        "eli", groups=["analysts"], **{"https://rollback.example/teams": ["reviewers"]}
    )
    sign_in(client, groups_sso, "eli")
    assert groups_of(User.objects.get(username="eli")) == {"reviewers"}


def test_unset_the_groups_are_the_admins_to_set(client, groups_sso, settings):
    settings.OIDC_GROUPS_CLAIM = ""
    groups_sso.add_user("fay", PASSWORD)
    groups_sso.set_claims("fay", groups=["analysts"])
    sign_in(client, groups_sso, "fay")
    user = User.objects.get(username="fay")
    assert groups_of(user) == set()  # a new account: no groups from the claim
    user.groups.set([Group.objects.get(name="reviewers")])  # as the admin sets them
    groups_sso.set_claims("fay", drop=("groups",))
    assert sign_in(client, groups_sso, "fay").status_code == 302
    assert signed_in_as(client) == user
    assert groups_of(user) == {"reviewers"}


def refused(answer, said: str) -> None:
    assert answer.status_code == 403
    assert said in text(answer)
    assert 'data-testid="sso-error"' in answer.content.decode()


def test_a_claim_that_is_not_names_refuses_the_sign_in_and_changes_nothing(client, groups_sso):
    groups_sso.add_user("gus", PASSWORD)
    groups_sso.set_claims("gus", groups=["analysts"])
    sign_in(client, groups_sso, "gus")
    user = User.objects.get(username="gus")
    identity = SsoIdentity.objects.get(user=user)
    for bad in ({"name": "reviewers"}, ["reviewers", 7], [["reviewers"]], 42, True):
        groups_sso.set_claims("gus", groups=bad)
        answer = sign_in(client, groups_sso, "gus")
        refused(answer, f"Test SSO {NOT_NAMES}, so you are not signed in and nothing was changed")
        assert signed_in_as(client) is None, bad
        assert groups_of(user) == {"analysts"}, bad
        assert SsoIdentity.objects.get(pk=identity.pk).last_sign_in_at == identity.last_sign_in_at
    # A newcomer with such a claim gets no account at all.
    groups_sso.add_user("hal", PASSWORD)
    groups_sso.set_claims("hal", groups={"name": "analysts"})
    refused(sign_in(client, groups_sso, "hal"), NOT_NAMES)
    assert not User.objects.filter(username="hal").exists()


def test_more_than_a_thousand_names_refuse_the_sign_in(client, groups_sso):
    groups_sso.add_user("ida", PASSWORD)
    groups_sso.set_claims("ida", groups=["analysts"])
    sign_in(client, groups_sso, "ida")
    user = User.objects.get(username="ida")
    many = [f"team-{n}" for n in range(1000)]
    groups_sso.set_claims("ida", groups=["reviewers", *many])  # 1,001
    answer = sign_in(client, groups_sso, "ida")
    refused(answer, "Test SSO sent 1,001 groups for you (its claim 'groups')")
    assert "this server takes at most 1,000" in text(answer)
    assert signed_in_as(client) is None
    assert groups_of(user) == {"analysts"}
    groups_sso.set_claims("ida", groups=["reviewers", *many[:999]])  # 1,000: taken
    assert sign_in(client, groups_sso, "ida").status_code == 302
    assert signed_in_as(client) == user
    assert groups_of(user) == {"reviewers"}
    groups_sso.add_user("jon", PASSWORD)
    groups_sso.set_claims("jon", groups=["analysts", *many])
    refused(sign_in(client, groups_sso, "jon"), "at most 1,000")
    assert not User.objects.filter(username="jon").exists()


def test_names_longer_than_a_group_name_are_ignored(client, groups_sso):
    # SQLite keeps a name longer than Group.name's 150 characters; no sign-in may match it.
    Group.objects.create(name="l" * 151)
    Group.objects.create(name="k" * 150)
    groups_sso.add_user("kim", PASSWORD)
    groups_sso.set_claims("kim", groups=["l" * 151, "k" * 150, "x" * 100_000])
    assert sign_in(client, groups_sso, "kim").status_code == 302
    assert groups_of(User.objects.get(username="kim")) == {"k" * 150}


def test_the_flags_of_staff_and_superusers_are_never_changed(client, sso, settings):
    """The site's first account, made by single sign-on, is its administrator: the claim's
    groups, or none, leave that as it is."""
    settings.OIDC_GROUPS_CLAIM = "groups"
    Group.objects.create(name="analysts")
    sso.add_user("root", PASSWORD)
    sso.set_claims("root", groups=[])
    sign_in(client, sso, "root")
    root = User.objects.get(username="root")
    assert (root.is_staff, root.is_superuser, groups_of(root)) == (True, True, set())
    sso.set_claims("root", groups=["analysts"])
    sign_in(client, sso, "root")
    root.refresh_from_db()
    assert (root.is_staff, root.is_superuser, groups_of(root)) == (True, True, {"analysts"})
    sso.set_claims("root", drop=("groups",))
    sign_in(client, sso, "root")
    root.refresh_from_db()
    assert (root.is_staff, root.is_superuser, groups_of(root)) == (True, True, set())


MARKUP = '<script>alert("group")</script>'


def test_a_group_name_with_markup_shows_as_text(client, groups_sso, admin_client):
    Group.objects.create(name=MARKUP)
    groups_sso.add_user("lou", PASSWORD)
    groups_sso.set_claims("lou", groups=[MARKUP, "analysts"])
    assert sign_in(client, groups_sso, "lou").status_code == 302
    user = User.objects.get(username="lou")
    assert groups_of(user) == {MARKUP, "analysts"}
    pages = {
        "the profile": client.get(reverse("accounts:profile")),
        "the admin's user": admin_client.get(reverse("admin:accounts_user_change", args=[user.pk])),
        "the admin's groups": admin_client.get(reverse("admin:auth_group_changelist")),
    }
    for where, page in pages.items():
        assert page.status_code == 200, where
        assert MARKUP not in page.content.decode(), where
    assert "&lt;script&gt;" in pages["the admin's user"].content.decode()
