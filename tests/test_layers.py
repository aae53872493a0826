"""The packages depend one way (pyproject.toml's import-linter layers, docs/architecture.md).

import-linter sees imports; a model can also depend on another package through a relation named by
a string label ("checkpoints.Checkpoint"), which no import shows. These hold that every relation of
every model points at a class defined in its own package or in one below it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from django.apps import apps
from django.db import models

PYPROJECT = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
CONTRACTS = PYPROJECT["tool"]["importlinter"]["contracts"]
# The packages from the highest to the lowest, as the import contract has them.
LAYERS: list[str] = next(c["layers"] for c in CONTRACTS if c["type"] == "layers")


def layer_of(model: type[models.Model]) -> int | None:
    """The layer of the package that defines `model` (0 the highest); None for Django's own
    models and those of other libraries."""
    package = model.__module__.split(".")[0]
    return LAYERS.index(package) if package in LAYERS else None


def upward_relations() -> list[str]:
    found = []
    for model in apps.get_models():
        own = layer_of(model)
        if own is None:
            continue
        for field in model._meta.get_fields(include_hidden=True):
            if not field.is_relation or field.auto_created or field.related_model is None:
                continue
            target = layer_of(field.related_model)
            if target is not None and target < own:
                found.append(f"{model.__module__}.{model.__name__}.{field.name}")
    return found


def test_the_layers_are_those_of_the_import_contract() -> None:
    assert LAYERS[-3:] == ["memories", "accounts", "core"]
    assert LAYERS.index("checkpoints") < LAYERS.index("sessions_app")


def test_no_model_refers_to_a_model_of_a_higher_layer() -> None:
    assert upward_relations() == []


def test_the_checkpoint_model_sits_with_the_branches_that_refer_to_it() -> None:
    from checkpoints.models import Checkpoint
    from sessions_app.models import Checkpoint as Defined

    assert Checkpoint is Defined
    # Its label, table and migrations are where deployments have them.
    assert Checkpoint._meta.label == "checkpoints.Checkpoint"
    assert Checkpoint._meta.db_table == "checkpoints_checkpoint"
