from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from accounts.services import apikey_create


def bearer_client(user) -> APIClient:
    _, secret = apikey_create(user=user, name="tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    client.secret = secret
    return client


@pytest.fixture
def api(alice):
    return bearer_client(alice)


@pytest.fixture
def bob_api(bob):
    return bearer_client(bob)
