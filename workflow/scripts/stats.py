from forgetting.stats.run import write_stats
from forgetting.workflow import study_of

write_stats(study_of(snakemake), dict(snakemake.input), dict(snakemake.output), snakemake.log[0])  # noqa: F821
