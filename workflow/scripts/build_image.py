import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.cluster.containers import build_image
from forgetting.workflow import job, study_of

with job(snakemake):  # noqa: F821
    settings = study_of(snakemake).cluster.containers  # noqa: F821
    build_image(snakemake.input.definition, snakemake.output[0], settings, log=snakemake.log[0])  # noqa: F821
