import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.study.plan import write_run_table
from forgetting.workflow import job, study_of

with job(snakemake):  # noqa: F821
    write_run_table(study_of(snakemake), snakemake.output[0])  # noqa: F821
