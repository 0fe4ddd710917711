"""The instance images' registry names and architecture: config keys, the host's by default,
swebench's scheme, and no architecture written into the code."""

from __future__ import annotations

import subprocess

import pytest
from swebench.image_builder.image_spec import ImageSpec

from forgetting.foundation.errors import ConfigError
from forgetting.instances.images import InstanceImages, host_architecture
from forgetting_testkit.checkout import ROOT


@pytest.mark.parametrize(("machine", "arch"), [("x86_64", "x86_64"), ("AMD64", "x86_64"), ("aarch64", "arm64"),
                                               ("arm64", "arm64")])
def test_the_host_architecture_in_swebenchs_names(machine, arch):
    assert host_architecture(machine) == arch


def test_an_architecture_swebench_has_no_images_for_is_an_error():
    with pytest.raises(ConfigError, match=r"this host is 'ppc64le', for which SWE-bench has no instance images"):
        host_architecture("ppc64le")


def test_the_default_is_the_hosts(monkeypatch):
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    images = InstanceImages.from_section({})
    assert (images.architecture, images.goarch) == ("arm64", "arm64")
    spec = ImageSpec(instance_id="astropy__astropy-12907", dockerfile="-", namespace="swebench", arch="arm64")
    assert images.name("astropy__astropy-12907") == spec.name
    assert spec.name == "swebench/sweb.eval.arm64.astropy_1776_astropy-12907:latest"
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    assert InstanceImages.from_section({}).goarch == "amd64"
    assert InstanceImages.from_section({"architecture": "arm64"}).goarch == "arm64"  # set: the host's is not asked


def test_a_template_of_ones_own(monkeypatch):
    images = InstanceImages.from_section({"architecture": "arm64", "namespace": "registry.site/swe",
                                          "name_template": "{namespace}/{instance_id}-{arch}:v2"})
    assert images.name("Django__django-1") == "registry.site/swe/django__django-1-arm64:v2"
    assert images.uri("a__b") == "docker://registry.site/swe/a__b-arm64:v2"
    oras = InstanceImages.from_section({"architecture": "x86_64", "name_template": "oras://h/{id}:{arch}"})
    assert oras.uri("a__b") == "oras://h/a_1776_b:x86_64"


@pytest.mark.parametrize(("template", "message"), [
    ("{namespace}/{tag}", r"unknown placeholder \{tag\}"),
    ("{namespace}/image:latest", r"it names no \{id\}"),
    ("{namespace/x", "is not a template"),
])
def test_a_bad_template_stops_the_config_with_one_line(template, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        InstanceImages.from_section({"name_template": template})
    import yaml

    from forgetting.study.config import load_study

    cfg = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    cfg["evaluation"] = {"instance_images": {"name_template": template}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=rf"c.yaml: evaluation.instance_images.name_template: .*{message}"):
        load_study(path)


def test_no_architecture_is_written_into_the_pipeline():
    """The published images' architecture in a name is the template's `{arch}`, never a literal."""
    where = ["src", "workflow", "config", "containers", "docs", "README.md", "envs", "profiles", "testkit", "tests",
             "benchmarks", "scripts"]
    found = subprocess.run(["git", "grep", "-n", "sweb.eval." + "x86_64", "--", *where],
                           cwd=ROOT, capture_output=True, text=True)
    assert found.stdout == "", found.stdout
