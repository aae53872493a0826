"""core.model_choice: the models and temperatures a session may ask for (billed to the operator)."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from core.model_choice import (
    DEMO_MODEL_ID,
    allowed_models,
    check_model_settings,
    chosen_model,
    chosen_temperature,
)


@pytest.fixture
def served_model(settings):
    """A model server is configured (not the demo model), its default model `house-model`."""
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    settings.OPENAI_API_KEY = "key"
    settings.AGENT_MODEL = "house-model"
    settings.AGENT_ALLOWED_MODELS = []


def test_by_default_only_the_configured_model_is_allowed(served_model):
    assert allowed_models() == ["house-model"]
    check_model_settings({"settings": {"model": "house-model"}})
    assert chosen_model({"model": "house-model"}) == "house-model"
    with pytest.raises(InvalidInput, match=r"'gpt-4o' is not allowed here.*house-model"):
        check_model_settings({"settings": {"model": "gpt-4o"}})


def test_the_allow_list_adds_models_and_keeps_the_default(served_model, settings):
    settings.AGENT_ALLOWED_MODELS = ["cheap-model", "other-model"]
    assert allowed_models() == ["house-model", "cheap-model", "other-model"]
    check_model_settings({"settings": {"model": "other-model"}})
    assert chosen_model({"model": " other-model "}) == "other-model"
    with pytest.raises(InvalidInput):
        check_model_settings({"settings": {"model": "o1-pro"}})


def test_the_demo_model_is_allowed_only_while_it_answers(served_model, settings):
    with pytest.raises(InvalidInput):
        check_model_settings({"settings": {"model": DEMO_MODEL_ID}})
    settings.OPENAI_BASE_URL = settings.OPENAI_API_KEY = ""
    check_model_settings({"settings": {"model": DEMO_MODEL_ID}})
    assert chosen_model({"model": DEMO_MODEL_ID}) == DEMO_MODEL_ID


@pytest.mark.parametrize("model", [None, "", "  "])
def test_no_model_means_the_default(served_model, model):
    check_model_settings({"settings": {"model": model}})
    assert chosen_model({"model": model}) is None  # the callers then use AGENT_MODEL


@pytest.mark.parametrize("model", [42, ["house-model"], {"id": "house-model"}])
def test_a_model_that_is_not_text_is_refused(served_model, model):
    with pytest.raises(InvalidInput, match="must be text"):
        check_model_settings({"settings": {"model": model}})


@pytest.mark.parametrize("temperature", [0, 0.7, 1, 2, 2.0, None])
def test_temperatures_from_0_to_2_are_allowed(served_model, temperature):
    check_model_settings({"settings": {"temperature": temperature}})
    chosen = chosen_temperature({"temperature": temperature})
    assert chosen == temperature
    assert chosen is None or type(chosen) is float  # the model's settings take a float


@pytest.mark.parametrize("temperature", [-0.1, 2.01, 100, "0.5", True, float("nan"), float("inf")])
def test_other_temperatures_are_refused(served_model, temperature):
    with pytest.raises(InvalidInput, match="from 0 to 2"):
        check_model_settings({"settings": {"temperature": temperature}})


@pytest.mark.parametrize(
    ("metadata", "refused"),
    [
        (None, None),
        ({}, {"settings": {"model": "o1-pro"}}),
        ({"tags": ["x"]}, {"tags": ["x"], "settings": {"temperature": 3}}),
        ({"settings": "not an object"}, {"settings": {"model": 42}}),
    ],
)
def test_metadata_that_chooses_nothing_passes(served_model, metadata, refused):
    """Nothing chosen: nothing to refuse (`check_model_settings` raises InvalidInput on a
    refusal, as it does for the same metadata once it chooses a model or temperature)."""
    check_model_settings(metadata)
    if refused is not None:
        with pytest.raises(InvalidInput):
            check_model_settings(refused)
