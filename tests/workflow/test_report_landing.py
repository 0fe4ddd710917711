"""The HTML report's landing text (``workflow/report/workflow.rst``, the report's global
description) says what the study is: its name, agents and its own count of deletion
configurations, taken from the config Snakemake renders it with — not the paper's 42 about a
9-configuration demo (issue 25, "docs that run as written").

Rendered as Snakemake renders it (``snakemake/report/__init__.py``: the file is a Jinja2
template given ``snakemake.config``, then reStructuredText through docutils)."""

from __future__ import annotations

import copy

import jinja2
import pytest
import yaml
from docutils.core import publish_parts

from forgetting.foundation.config_schema import filled
from forgetting.study.config import load_study
from forgetting_testkit.checkout import ROOT

TEMPLATE = (ROOT / "workflow/report/workflow.rst").read_text(encoding="utf-8")


def landing(config: dict) -> str:
    class Snakemake:  # what Snakemake hands the template
        pass

    Snakemake.config = filled(config)  # validate() fills the schema's defaults into config first
    text = jinja2.Environment().from_string(TEMPLATE).render(snakemake=Snakemake, categories={}, files={})
    html = publish_parts(text, writer_name="html", settings_overrides={"report_level": 2, "halt_level": 2})
    return html["html_body"]


@pytest.mark.parametrize("config", ["config/demo.yaml", "config/config.yaml"])
def test_the_landing_text_counts_the_studys_own_configurations(config) -> None:
    study = load_study(ROOT / config)
    html = landing(yaml.safe_load((ROOT / config).read_text()))
    n = len(study.deletion_configurations)
    assert f"Each of its {n} deletion configurations" in " ".join(html.split()), html
    assert f"<em>{study.name}</em>" in html and ", ".join(study.agents) in html
    if n != 42:
        assert "Each of the 42" not in html


def test_a_narrowed_invocation_does_not_claim_a_count() -> None:
    cfg = copy.deepcopy(yaml.safe_load((ROOT / "config/demo.yaml").read_text()))
    cfg["only"] = ["immediate-token-both-75"]
    html = " ".join(landing(cfg).split())
    assert "Each deletion configuration this invocation selected" in html and "Each of its" not in html
