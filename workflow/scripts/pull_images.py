import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.cluster.containers import pull_chunk
from forgetting.workflow import job, study_of

with job(snakemake):  # noqa: F821
    pull_chunk(study_of(snakemake), snakemake.wildcards.chunk, snakemake.output[0], log=snakemake.log[0])  # noqa: F821
