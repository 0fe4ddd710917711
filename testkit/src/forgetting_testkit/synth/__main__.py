"""``python -m forgetting_testkit.synth CONFIG --out DIR`` (the ``forgetting-synth`` command)."""

from forgetting_testkit.synth.cli import main

raise SystemExit(main())
