import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.analyze.batch import analyze_batch
from forgetting.workflow import batch_of, job, study_of

with job(snakemake):  # noqa: F821
    study = study_of(snakemake)  # noqa: F821
    analyze_batch(study, batch_of(study, snakemake.wildcards), outputs=dict(snakemake.output), log=snakemake.log[0])  # noqa: F821
