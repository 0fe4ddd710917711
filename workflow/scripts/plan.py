import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.plan import write_run_table
from forgetting.workflow import study_of

write_run_table(study_of(snakemake), snakemake.output[0])  # noqa: F821
