"""The data the tests read but the project never commits: ``shared/data/`` beside the checkout.

CI puts a copy of ``shared/`` beside a fresh clone, so the tests find it as ``../shared/data``
relative to the checkout; ``FORGETTING_SHARED_DATA`` names another directory. A test that
needs a file of it skips with the reason when it is absent (:func:`shared_file`).
"""

from __future__ import annotations

import os
from pathlib import Path

from forgetting_testkit.checkout import ROOT

ENV = "FORGETTING_SHARED_DATA"
#: SWE-bench Verified's 500 rows (test split) in the classic princeton-nlp schema
VERIFIED_PARQUET = "swe-bench-verified.parquet"
VERIFIED_IDS = "swe-bench-verified-ids.txt"


def shared_data_dir() -> Path:
    return Path(os.environ.get(ENV) or ROOT.parent / "shared" / "data")


def shared_file(name: str) -> Path:
    """``shared/data/NAME``, or the calling test skipped, saying where it looked."""
    import pytest

    path = shared_data_dir() / name
    if not path.is_file():
        pytest.skip(f"{path} is absent: the shared test data sits in ../shared/data beside the checkout "
                    f"(or set {ENV})")
    return path
