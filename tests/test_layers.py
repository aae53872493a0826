"""The packages depend one way (pyproject.toml's import-linter layers, docs/architecture.md).

import-linter sees imports; a model can also depend on another package through a relation named by
a string label ("checkpoints.Checkpoint"), which no import shows. Each table has one home, the
package whose label it has; a relation by name may point up only where it is listed here, so a new
one is a decision, not an accident.
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


# The relations by name that point up a layer: a branch's fork point and a turn's checkpoints are
# checkpoints' rows, which sessions_app's code never imports (sessions_app.hooks).
UPWARD = [
    "sessions_app.models.branch.Branch.forked_from",
    "sessions_app.models.turn.Turn.checkpoint",
    "sessions_app.models.turn.Turn.rolled_back_to",
]


def test_the_layers_are_those_of_the_import_contract() -> None:
    assert LAYERS[-4:] == ["memories", "access", "accounts", "core"]
    assert LAYERS.index("checkpoints") < LAYERS.index("workspace") < LAYERS.index("sessions_app")


def test_only_the_listed_relations_point_to_a_higher_layer() -> None:
    assert sorted(upward_relations()) == UPWARD


def test_every_model_is_defined_in_the_package_whose_label_it_has() -> None:
    misplaced = [
        f"{model.__module__}.{model.__name__} ({model._meta.app_label})"
        for model in apps.get_models()
        if layer_of(model) is not None and model.__module__.split(".")[0] != model._meta.app_label
    ]
    assert misplaced == []


def test_the_moved_models_keep_their_labels_and_tables() -> None:
    from checkpoints.models import Checkpoint
    from workspace.models import FileVersion, WorkspaceBlob

    assert Checkpoint.__module__ == "checkpoints.models"
    assert Checkpoint._meta.db_table == "checkpoints_checkpoint"
    assert FileVersion._meta.db_table == "workspace_fileversion"
    assert WorkspaceBlob._meta.db_table == "workspace_workspaceblob"


def test_the_renamed_models_keep_their_tables_and_seed_names() -> None:
    from sessions_app.models import Branch, ExternalSession, InternalSession, Session  # seed name

    assert ExternalSession is Session  # seed name
    assert InternalSession is Branch  # seed name
    assert Session._meta.db_table == "sessions_app_externalsession"
    assert Branch._meta.db_table == "sessions_app_internalsession"
