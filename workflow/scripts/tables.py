import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.report.tables import write_tables
from forgetting.workflow import job, study_of

with job(snakemake):  # noqa: F821
    write_tables(study_of(snakemake), dict(snakemake.input), list(snakemake.output), snakemake.log[0])  # noqa: F821
