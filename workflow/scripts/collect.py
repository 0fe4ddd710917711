import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.collect import collect
from forgetting.workflow import study_of

collect(study_of(snakemake), outputs=list(snakemake.output), log=snakemake.log[0])  # noqa: F821
