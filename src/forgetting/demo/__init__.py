"""Everything of the embedded demo, together: the parts a real study does not run.

* :mod:`.scripted` — the scripted stand-in for the LLM (a deterministic model server,
  ``forgetting scripted-model``; ``model.backend: scripted``);
* :mod:`.tasks` — the demo tasks under ``resources/demo/`` (instances, checkouts, solutions;
  ``dataset.kind: demo``; ``forgetting demo setup``);
* ``pytest_plugins/`` — the fixed-duration pytest plugin the agent's shell loads in local demo
  runs (``agent.fixed_test_durations``; a plugin directory put on the shell's ``PYTHONPATH``,
  so it holds no pipeline code and is no package).
"""
