"""What a study never runs: support for the tests and benchmarks of ``forgetting``.

Not the product. The product package never imports this one. It holds the synthetic-study
generator (:mod:`.synth`, the ``forgetting-synth`` command), the effect simulator of the
statistics tests and benchmarks (:mod:`.effects`), the cost definitions taken literally
(:mod:`.naive_cost`), dry-run submission counting (:mod:`.submissions`), the test doubles
(:mod:`.fakes`) and the helpers the test files share (studies, histories, trajectories,
fixture tasks, dry-runs; :mod:`.checkout` locates the repository checkout).
"""
