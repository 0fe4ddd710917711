"""The evaluation backends by name (forgetting.evaluate.backends.BACKENDS): each value the
schema allows for ``evaluation.backend`` names a class that the study's settings configure."""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest

from forgetting.evaluate.backends import BACKENDS, make_backend
from forgetting.foundation.config_schema import schema_at
from forgetting.foundation.errors import ConfigError
from forgetting.study.config import load_study


def test_the_registry_names_what_the_schema_allows():
    assert list(BACKENDS) == schema_at("evaluation.backend")["enum"]


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backend_is_a_class_of_its_name(name):
    module, _, attr = BACKENDS[name].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    assert cls.name == name
    assert all(callable(getattr(cls, method)) for method in ("for_study", "check", "evaluate"))


def test_a_demo_study_gets_the_local_backend(study_file):
    study = load_study(study_file)
    backend = make_backend(study.evaluation, study)
    assert backend.name == "local"


def test_an_unknown_backend_is_one_line_naming_the_allowed_ones(study_file):
    study = load_study(study_file)
    with pytest.raises(ConfigError, match=r"evaluation.backend: 'podman' is not allowed; allowed values: docker, "
                                          r"apptainer, local$"):
        make_backend(replace(study.evaluation, backend="podman"), study)
