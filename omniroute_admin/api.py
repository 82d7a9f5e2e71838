"""The one NinjaAPI, mounted at /api/v1/: each app contributes one Router."""

from ninja import NinjaAPI

api = NinjaAPI(
    title="OmniRoute Admin API",
    version="1",
    description=(
        "Subscription-first routing for LLM gateways: the billing catalog, connections, "
        "quota readings and the pools of `auto/subscription` (fails closed) and "
        "`auto/thrifty` (fails open, escalates one rung at a time)."
    ),
    urls_namespace="api-v1",
)
