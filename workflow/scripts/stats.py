import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.report.stats.run import write_stats
from forgetting.workflow import job, study_of

with job(snakemake):  # noqa: F821
    write_stats(
        study_of(snakemake),  # noqa: F821
        dict(snakemake.input),  # noqa: F821
        dict(snakemake.output),  # noqa: F821
        snakemake.log[0],  # noqa: F821
        configs=list(snakemake.params.configfiles),  # noqa: F821
    )
