import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.cluster.preflight import run_in_job
from forgetting.workflow import job, study_of

with job(snakemake):  # noqa: F821
    run_in_job(study_of(snakemake), snakemake.params.partition, out=snakemake.output[0], log=snakemake.log[0])  # noqa: F821
