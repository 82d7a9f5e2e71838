"""From a LiteLLM model list to OmniRoute connections and candidates (pure).

Each deployment names its connection in `model_info["omniroute_connection_id"]` (and may
name its auth type in `omniroute_auth_type`, default "apikey"; its categories in
`omniroute_categories`). Provider and model come from `litellm_params.model`
("anthropic/claude-sonnet-4"; `custom_llm_provider` wins when set). Deployments of one
model group with the same provider and model form one candidate whose allowlist is their
connections, in model-list order; candidates are ranked in model-list order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# LiteLLM's provider ids that the curated catalog names otherwise; used only when the
# control plane has no alias endpoint (a server that has one normalises them itself).
LITELLM_TO_CATALOG = {
    "anthropic": "claude",
    "github_copilot": "copilot",
    "chatgpt": "codex",
}


class ModelListError(ValueError):
    """A deployment of the model list cannot be mapped."""


@dataclass
class Deployment:
    dispatch_id: str  # the model_info id of its copy in the dispatch group
    original: dict[str, Any]
    connection_id: str
    auth_type: str
    provider: str  # as LiteLLM names it
    model: str


@dataclass
class Candidate:
    ref: str
    group: str
    provider: str  # as LiteLLM names it
    model: str
    categories: list[str] = field(default_factory=list)
    deployments: list[Deployment] = field(default_factory=list)

    @property
    def connection_ids(self) -> list[str]:
        seen: list[str] = []
        for deployment in self.deployments:
            if deployment.connection_id not in seen:
                seen.append(deployment.connection_id)
        return seen


def split_model(litellm_params: dict[str, Any]) -> tuple[str, str]:
    model = str(litellm_params.get("model") or "")
    provider = litellm_params.get("custom_llm_provider")
    if "/" in model:
        head, tail = model.split("/", 1)
        if provider is None:
            return head.strip().lower(), tail
        if head.strip().lower() == str(provider).strip().lower():
            return str(provider).strip().lower(), tail
    if provider is None:
        raise ModelListError(f"cannot tell the provider of {model!r}: write it as provider/model")
    return str(provider).strip().lower(), model


def build_candidates(model_list: list[dict[str, Any]], dispatch_prefix: str) -> list[Candidate]:
    """The candidates of the deployments that name an OmniRoute connection."""
    by_key: dict[tuple[str, str, str], Candidate] = {}
    for index, deployment in enumerate(model_list):
        info = deployment.get("model_info") or {}
        connection_id = info.get("omniroute_connection_id")
        if not connection_id:
            continue
        group = str(deployment.get("model_name") or "")
        provider, model = split_model(deployment.get("litellm_params") or {})
        key = (group, provider, model)
        candidate = by_key.get(key)
        if candidate is None:
            candidate = Candidate(
                ref=f"{group}|{provider}/{model}", group=group, provider=provider, model=model
            )
            by_key[key] = candidate
        for category in info.get("omniroute_categories") or []:
            if category not in candidate.categories:
                candidate.categories.append(str(category))
        candidate.deployments.append(
            Deployment(
                dispatch_id=f"{dispatch_prefix}{index}",
                original=deployment,
                connection_id=str(connection_id),
                auth_type=str(info.get("omniroute_auth_type") or "apikey").strip().lower(),
                provider=provider,
                model=model,
            )
        )
    return list(by_key.values())


def catalog_provider(provider: str, server_has_aliases: bool) -> str:
    return provider if server_has_aliases else LITELLM_TO_CATALOG.get(provider, provider)


def pool_candidates(candidates: list[Candidate], server_has_aliases: bool) -> list[dict[str, Any]]:
    """The body's candidates of `POST /pools/{auto_id}`: every candidate, in order."""
    pool = []
    for candidate in candidates:
        entry: dict[str, Any] = {
            "provider": catalog_provider(candidate.provider, server_has_aliases),
            "model": candidate.model,
            "categories": candidate.categories,
            "ref": candidate.ref,
        }
        connections = candidate.connection_ids
        if len(connections) == 1:
            entry["connection_id"] = connections[0]
        else:
            entry["allowed_connection_ids"] = connections
        pool.append(entry)
    return pool


def dispatch_order(
    decision_candidates: list[dict[str, Any]], candidates: list[Candidate]
) -> list[tuple[Deployment, str | None]]:
    """The deployments to try, in the decision's order, each with the rung it is on."""
    by_ref = {candidate.ref: candidate for candidate in candidates}
    order: list[tuple[Deployment, str | None]] = []
    seen: set[str] = set()
    for entry in decision_candidates:
        candidate = by_ref.get(str(entry.get("ref")))
        if candidate is None:
            continue
        connections = (
            [entry["connection_id"]]
            if entry.get("connection_id")
            else entry.get("allowed_connection_ids") or []
        )
        for connection_id in connections:
            for deployment in candidate.deployments:
                if deployment.connection_id == connection_id and deployment.dispatch_id not in seen:
                    seen.add(deployment.dispatch_id)
                    order.append((deployment, entry.get("rung")))
    return order
