import _checkout  # noqa: F401  (this checkout's src/ first on sys.path)

from forgetting.evaluate import evaluate_batch
from forgetting.workflow import batch_of, job, study_of

with job(snakemake):  # noqa: F821
    study = study_of(snakemake)  # noqa: F821
    batch = batch_of(study, snakemake.wildcards)  # noqa: F821
    evaluate_batch(study, batch, manifest=snakemake.output.manifest, log=snakemake.log[0])  # noqa: F821
