"""The one NinjaAPI, mounted at /api/v1/: each app contributes one Router."""

from typing import Any

from ninja import NinjaAPI

from billing.api import router as billing_router
from ladder.api import router as ladder_router
from omniroute_admin.errors import install_handlers
from omniroute_admin.openapi_examples import add_examples


class OmniRouteAPI(NinjaAPI):
    """The NinjaAPI whose OpenAPI document carries an example for every response schema."""

    def get_openapi_schema(self, **kwargs: Any) -> Any:
        return add_examples(super().get_openapi_schema(**kwargs))


api = OmniRouteAPI(
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
