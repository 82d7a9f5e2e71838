"""The one NinjaAPI, mounted at /api/v1/: each app contributes one Router."""

from ninja import NinjaAPI

from billing.api import router as billing_router
from ladder.api import router as ladder_router
from omniroute_admin.errors import install_handlers

api = NinjaAPI(
    title="OmniRoute Admin API",
    version="1",
    description=(
        "Subscription-first routing for LLM gateways: the billing catalog, connections, "
        "quota readings and the pools of `auto/subscription` (fails closed: never a cent "
        "of extra spend) and `auto/thrifty` (fails open, escalates one rung at a time). "
        "Authenticate with `Authorization: Bearer <token>` (scopes: gateway, operator)."
    ),
    urls_namespace="api-v1",
    docs_url="/docs",
    openapi_url="/openapi.json",
)
install_handlers(api)
api.add_router("", billing_router)
api.add_router("", ladder_router)
