import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.report.collect import collect
from forgetting.workflow import job, study_of

with job(snakemake):  # noqa: F821
    collect(study_of(snakemake), outputs=list(snakemake.output), log=snakemake.log[0])  # noqa: F821
