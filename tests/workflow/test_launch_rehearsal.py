"""The launch rehearsal: the real ``profiles/slurm`` with each site model's values, the real
Snakemake and the Slurm executor plugin's own sbatch lines, for every route and entry, each
submission checked against the site (``forgetting_testkit.rehearsal``).

A route a site cannot run must be refused by the workflow itself before any job (its placement
lines); a route it can run must submit only jobs the site accepts and can execute: partitions
that exist, resources that fit a node and the time limit, GPUs only where there are GPUs,
Snakemake's Python and environments only on its own architecture, and every image on the
architecture it was built (or pulled) for.
"""

from __future__ import annotations

import pytest
import yaml

from forgetting_testkit.checkout import ROOT
from forgetting_testkit.rehearsal import (
    Site,
    configured_instance_arch,
    documented_snakemake,
    load_site,
    rehearse,
    render_profile,
    site_names,
)

pytestmark = pytest.mark.slow

#: the instance images' architecture each route's config states
IMAGE_ARCH = {"A": "arm64", "B": "x86_64", "C": "x86_64"}
#: the routes each site model runs the study by (the others must be refused before any job)
RUNS = {"gh200-only": {"A", "B"}, "gh200-x86-cpu": {"C"}, "x86-gpu": {"B", "C"}}
ENTRIES = {"images": ["images"], "preflight": ["preflight"], "configuration": None, "study": []}
CONFIGURATION = "delayed-turn-tool_output-50"


def documented_command(route: str) -> list[str]:
    """The route's snakemake command as docs/cluster.md (route C) or the README gives it."""
    if route == "C":
        return documented_snakemake(ROOT / "docs" / "cluster.md",
                                    "snakemake --profile profiles/slurm --configfile config/config.yaml "
                                    "config/route-c.yaml")
    if route == "B":
        return ["--profile", "profiles/slurm", "--configfile", "config/config.yaml", "config/route-b.yaml"]
    return ["--profile", "profiles/slurm"]


def argv_for(route: str, entry: str, profile: str, site: Site) -> list[str]:
    """The documented command with the site's profile and, where it names the site's partitions
    by their placeholders, the site's names — as a user types it."""
    names = {"CHANGE-ME-cpu": site.profile["cpu_partition"], "CHANGE-ME-gh200": site.profile["gpu_partition"]}
    argv = []
    for w in documented_command(route):
        for placeholder, name in names.items():
            w = w.replace(placeholder, name)
        argv.append(profile if w == "profiles/slurm" else w)
    if ENTRIES[entry] is None:
        return [*argv, "--config", f"only={CONFIGURATION}"]
    return [*argv, "--", *ENTRIES[entry]] if ENTRIES[entry] else argv


def test_every_site_model_has_a_route_and_the_shipped_routes_state_their_image_architecture():
    assert set(site_names()) == set(RUNS)
    for route, arch in IMAGE_ARCH.items():
        cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
        for overlay in {"B": ["route-b.yaml"], "C": ["route-c.yaml"]}.get(route, []):
            over = yaml.safe_load((ROOT / "config" / overlay).read_text())
            cfg["cluster"], cfg["evaluation"] = over["cluster"], {**cfg["evaluation"], **over["evaluation"]}
        assert cfg["cluster"]["route"] == route
        assert cfg["evaluation"]["instance_images"]["architecture"] == arch


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("route", sorted(IMAGE_ARCH))
@pytest.mark.parametrize("site_name", sorted(RUNS))
def test_launch_rehearsal(site_name, route, entry, tmp_path):
    site = load_site(site_name)
    profile = render_profile(site, tmp_path / "profile")
    argv = argv_for(route, entry, str(profile), site)
    files = [ROOT / w for w in argv if w.startswith("config/") and w.endswith(".yaml")] or [ROOT / "config/config.yaml"]
    r = rehearse(site, profile, argv, configured_instance_arch(files))
    assert r.returncode == 0, r.log[-3000:]
    if route not in RUNS[site_name]:
        # refused by the workflow before any job: the same lines stop a real run at onstart
        assert r.workflow_warnings, (site_name, route, entry, r.problems)
        return
    assert not r.workflow_warnings, r.workflow_warnings
    assert r.subs, r.log[-2000:]
    assert not r.problems, "\n".join(r.problems)
    if entry in ("study", "configuration"):
        batches = [s for s in r.subs if s.rules[0].startswith("run_batch")]
        assert batches and all(s.partition == site.profile["gpu_partition" if route != "C" else "cpu_partition"]
                               for s in batches)


def test_a_route_the_site_cannot_run_stops_before_any_submission(tmp_path):
    """Not a dry run: the placement lines end Snakemake at onstart, before the first sbatch."""
    import subprocess

    from forgetting_testkit.checkout import bin_path, cli_env

    site = load_site("gh200-x86-cpu")
    profile = render_profile(site, tmp_path / "profile")
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["study"]["results_dir"] = str(tmp_path / "results")
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [bin_path("snakemake"), "--profile", str(profile), "--configfile", str(tmp_path / "study.yaml"),
         "--software-deployment-method", "apptainer", "--", "preflight"],
        cwd=ROOT, env=cli_env({"FORGETTING_HOST_ARCH": site.snakemake_arch}), capture_output=True, text=True,
        timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-2000:]
    assert "placement problem(s) above: no job submitted" in log
    assert "preflight_gpu: its partition is arm64 but Snakemake runs on x86_64" in log
    assert "submitted with SLURM jobid" not in log and "sbatch" not in log.replace("sbatch …", "")
