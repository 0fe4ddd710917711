"""The endpoint's health check: ``GET /v1/models`` with the batch's key.

It passes when the server is reachable, accepts the key and lists the served model name;
anything else is one :class:`EndpointError` line naming the endpoint (its base URL, never the
key) and what to do: unreachable, the key refused (401/403), the model not listed, rate
limited past the retries (429), failing (5xx), or answering something that is no model list
(an HTML page, a reply without ``data``). The request goes through the proxy's upstream
client, so it is retried, backed off and bounded as every model call is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from forgetting.foundation.errors import UserError
from forgetting.run.proxy.upstream import Upstream, describe_failure


class EndpointError(UserError):
    """The model endpoint cannot serve the study (one line naming it)."""


@dataclass(frozen=True)
class ModelEntry:
    """The served model as ``GET /v1/models`` lists it."""

    id: str
    owned_by: str | None


def list_models(upstream: Upstream) -> list[ModelEntry]:
    """The models the endpoint lists; :class:`EndpointError` when it cannot say."""
    reply = upstream.request("GET", "/models")
    if not reply.ok:
        raise EndpointError(describe_failure(reply, upstream.url, key_name=upstream.access.key_name,
                                             what=upstream.access.label))
    try:
        data = json.loads(reply.body)
    except ValueError:
        data = None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str)
                                                for e in entries):
        kind = reply.headers.get("content-type") or "no content type"
        raise EndpointError(f"model endpoint {upstream.url}: GET /v1/models did not return a model list "
                            f"(HTTP {reply.status}, {kind}); is the base URL the OpenAI API root (…/v1)?")
    return [ModelEntry(e["id"], e.get("owned_by") if isinstance(e.get("owned_by"), str) else None)
            for e in entries]


def check_endpoint(upstream: Upstream, served_name: str) -> ModelEntry:
    """The served model's entry, once the endpoint has shown it can serve it."""
    models = list_models(upstream)
    for entry in models:
        if entry.id == served_name:
            return entry
    listed = ", ".join(sorted(e.id for e in models)[:8]) or "no model"
    more = f" and {len(models) - 8} more" if len(models) > 8 else ""
    raise EndpointError(f"model endpoint {upstream.url} does not serve {served_name!r} (GET /v1/models lists "
                        f"{listed}{more}); set model.served_name to the name it lists")
