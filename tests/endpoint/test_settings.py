"""``model.endpoint`` read once: where the endpoint is, the key's variable (its name, never
its value), and each bad value as one line naming the key, when the study is loaded."""

from __future__ import annotations

import pytest

from forgetting.foundation.errors import ConfigError
from forgetting.run.model_server import BACKENDS, ServingBackend, backend_of
from forgetting.study.config import load_schema
from forgetting.study.endpoint import EndpointSettings
from forgetting_testkit.endpoints import TEST_KEY
from forgetting_testkit.runner import study_at

MODEL = {"backend": "endpoint", "name": "m", "served_name": "m"}


def test_the_registry_serves_every_backend_the_schema_allows():
    enum = load_schema()["properties"]["model"]["properties"]["backend"]["enum"]
    assert list(BACKENDS) == enum == ["vllm", "scripted", "endpoint"]
    assert isinstance(backend_of({"backend": "endpoint"}), ServingBackend)  # starts nothing: serves itself


def test_defaults_and_resolution(tmp_path):
    s = EndpointSettings.from_section({"base_url": "https://api.example.com/v1"})
    assert (s.base_url, s.address_file, s.api_key_env, s.max_concurrent_requests) == (
        "https://api.example.com/v1", None, None, None)
    assert s.address_wait_s == 3600 and s.api_key() is None
    s = EndpointSettings.from_section({"address_file": "results/x/address.json", "api_key_env": "MY_KEY",
                                       "max_concurrent_requests": 3}, root=tmp_path)
    assert s.address_file == tmp_path / "results/x/address.json" and s.max_concurrent_requests == 3
    assert s.api_key({"MY_KEY": f" {TEST_KEY}\n"}) == TEST_KEY  # a key read from a file keeps its newline


@pytest.mark.parametrize(("endpoint", "message"), [
    ({}, "model.endpoint: give base_url (a running server's API root) or address_file"),
    ({"base_url": "http://h/v1", "address_file": "a.json"}, "exactly one of them"),
    ({"base_url": "ftp://h/v1"}, "model.endpoint.base_url: 'ftp://h/v1' is not an http(s) URL"),
    ({"base_url": f"https://user:{TEST_KEY}@h/v1"}, "model.endpoint.base_url: the URL holds credentials"),
    ({"base_url": f"https://h/v1?key={TEST_KEY}"}, "model.endpoint.base_url: https://h…: the URL holds a query"),
    ({"base_url": "http://h/v1", "api_key_env": TEST_KEY}, "model.endpoint.api_key_env: not an environment variable"),
    ({"base_url": "http://h/v1", "max_concurrent_requests": 0}, "model.endpoint.max_concurrent_requests"),
])
def test_a_bad_endpoint_stops_the_study_when_it_is_loaded(tmp_path, endpoint, message):
    with pytest.raises(ConfigError) as error:
        study_at(tmp_path, model={**MODEL, "endpoint": endpoint})
    text = str(error.value)
    assert message in text and "\n" not in text
    assert TEST_KEY not in text  # a key put in the wrong place is never echoed


@pytest.mark.parametrize(("value", "message"), [
    (None, "the environment variable MY_KEY is not set where the batch runs; export MY_KEY=<your API key>"),
    ("  ", "is not set"),
    ("sk-a b", "the value of MY_KEY holds whitespace or control characters"),
])
def test_the_keys_variable_must_hold_one_key(value, message):
    s = EndpointSettings.from_section({"base_url": "http://h/v1", "api_key_env": "MY_KEY"})
    with pytest.raises(ConfigError, match=r"model\.endpoint\.api_key_env") as error:
        s.api_key({} if value is None else {"MY_KEY": value})
    assert message in str(error.value) and (value is None or value.strip() == "" or value not in str(error.value))
