import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.cluster.containers import ContainerSettings, build_image
from forgetting.workflow import job, study_of

with job(snakemake):  # noqa: F821
    settings = ContainerSettings.from_study(study_of(snakemake))  # noqa: F821
    build_image(snakemake.input.definition, snakemake.output[0], settings, log=snakemake.log[0])  # noqa: F821
