"""An MCP tool's image in the chat page: inside its tool message's card, served by
web.pages.tool_images to the session's owner only, as the image type its bytes show."""

from __future__ import annotations

import base64

import pytest
from django.urls import reverse

from sessions_app.services import message_append
from sharing.services import share_create
from tests.fakes.mcp_server import tiny_png

pytestmark = pytest.mark.django_db

PNG = tiny_png()


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def pictured(branch, *images: dict) -> object:
    return message_append(
        branch=branch,
        role="tool",
        tool_name="camera__snapshot",
        tool_result="The snapshot:\n[image img-1: image/png, 74 bytes]",
        metadata={"images": list(images)},
    )


def stored(data: bytes, mime: str = "image/png", id: str = "img-1") -> dict:
    return {"id": id, "mime": mime, "bytes": len(data), "data": base64.b64encode(data).decode()}


def image_url(session, message, index: int = 0) -> str:
    return reverse("chat:tool_image", args=[session.pk, message.pk, index])


def test_the_owner_gets_the_image_with_its_type_and_nosniff(as_alice, session, branch):
    message = pictured(branch, stored(PNG))

    response = as_alice.get(image_url(session, message))

    assert response.status_code == 200
    assert response.content == PNG
    assert response["Content-Type"] == "image/png"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]


def test_another_user_gets_a_404(client, bob, session, branch):
    message = pictured(branch, stored(PNG))
    client.force_login(bob)

    response = client.get(image_url(session, message))

    assert response.status_code == 404
    assert PNG not in response.content


def test_a_signed_out_visitor_is_sent_to_sign_in(client, session, branch):
    message = pictured(branch, stored(PNG))

    response = client.get(image_url(session, message))

    assert response.status_code == 302
    assert "/login" in response["Location"]


def test_an_image_that_is_not_there_is_a_404(as_alice, session, branch):
    message = pictured(branch, stored(PNG))
    plain = message_append(branch=branch, role="assistant", content="no image")

    assert as_alice.get(image_url(session, message, 1)).status_code == 404
    assert as_alice.get(image_url(session, plain)).status_code == 404


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (
            b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
            "image/svg+xml",
        ),
        (b"<html><script>alert(1)</script></html>", "image/png"),
        (PNG, "image/jpeg"),  # the bytes no longer match the stored type
    ],
)
def test_a_stored_image_that_is_not_a_safe_image_is_never_served(
    as_alice, session, branch, data, mime
):
    message = pictured(branch, stored(data, mime))

    assert as_alice.get(image_url(session, message)).status_code == 404


def test_the_image_is_shown_in_the_tool_card_of_the_chat_page(as_alice, session, branch):
    message = pictured(branch, stored(PNG), stored(PNG, id="img-2"))

    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()

    card = page[page.index(f'id="msg-{message.pk}"') :]
    card = card[: card.index('data-role="', 20)] if 'data-role="' in card[20:] else card
    assert f'src="{image_url(session, message, 0)}"' in card
    assert f'src="{image_url(session, message, 1)}"' in card
    assert 'alt="Image 1 returned by camera__snapshot"' in card


def test_the_share_page_shows_the_text_but_not_the_image(client, alice, session, branch):
    message = pictured(branch, stored(PNG))
    _, token = share_create(owner=alice, branch=branch)

    page = client.get(f"/s/{token}/").content.decode()

    assert "[image img-1: image/png, 74 bytes]" in page
    assert image_url(session, message) not in page
    assert "<img" not in page.split("<main", 1)[-1]
