"""A model server that already runs, as the study's model (``model.backend: endpoint``).

Any OpenAI-compatible server will do: your own vLLM or SGLang on another node, a lab
gateway, a hosted provider, or the model server job of the cluster's route C
(``forgetting serve``, which publishes its address in a file: :mod:`.address`). A batch
starts nothing: it reads the API key from the environment variable the config names,
checks the endpoint once before its runs (:mod:`.health`) and while they go on, and hands
each run's deletion proxy the key and the limits the batch's runs share
(:mod:`forgetting.run.proxy.upstream`, :mod:`forgetting.run.proxy.shared_limits`).

* :mod:`forgetting.study.endpoint` — ``model.endpoint`` checked and resolved
  (:class:`EndpointSettings`; below the config, which checks it when a study is loaded);
* :mod:`.address` — the address file a server job publishes and batch jobs wait for;
* :mod:`.health` — ``GET /v1/models``: reachable, the key accepted, the model listed;
* :mod:`.backend` — :class:`EndpointBackend`, the ``endpoint`` entry of
  :data:`forgetting.run.model_server.BACKENDS`;
* :mod:`.serve` — ``forgetting serve``: a model server as a job of its own that publishes
  its address.
"""
