"""The one NinjaAPI, mounted at /api/v1/: each app contributes one Router."""

import json
import threading
from typing import Any

from ninja import NinjaAPI
from ninja.responses import NinjaJSONEncoder

from billing import services as billing_services
from billing.alias_api import router as alias_router
from billing.api import router as billing_router
from ladder import services as ladder_services
from ladder.api import ROUTERS as LADDER_ROUTERS
from ladder.crypto import CredentialKeyMissing
from omniroute_admin.errors import install_handlers
from omniroute_admin.openapi_examples import add_examples


class OmniRouteAPI(NinjaAPI):
    """The NinjaAPI whose OpenAPI document carries an example for every response schema.

    The document depends on the code alone, so it is built once per process (per path
    prefix) and served from that copy: building it took most of a second on a loaded
    machine, which under the API deadline answered 503s (docs/RELIABILITY.md)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._built: dict[str, str] = {}  # path prefix -> the document as JSON
        self._build_lock = threading.Lock()

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> Any:
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        if path_prefix not in self._built:
            with self._build_lock:
                if path_prefix not in self._built:
                    document = super().get_openapi_schema(path_prefix=path_prefix)
                    self._built[path_prefix] = json.dumps(
                        add_examples(document), cls=NinjaJSONEncoder
                    )
        # A fresh copy: a caller that edits its document never edits the next caller's.
        return json.loads(self._built[path_prefix])

    def get_openapi_operation_id(self, operation: Any) -> str:
        """An endpoint's operation id names its API package and its function, not the file
        it sits in (`ladder_api_get_pool` for ladder.api.pools.get_pool), so moving an
        endpoint between the package's modules keeps its id."""
        module = operation.view_func.__module__
        app, _, rest = module.partition(".api.")
        if rest:
            module = f"{app}.api"
        return f"{module}_{operation.view_func.__name__}".replace(".", "_")


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
# Every domain error the endpoints let through, with its status (its body is
# `{"detail": str(error)}`); Django ValidationErrors answer ninja's 422 list.
DOMAIN_STATUSES: dict[type[Exception], int] = {
    ladder_services.NotFound: 404,
    ladder_services.UnknownCategory: 404,
    ladder_services.ConnectionExists: 409,
    ladder_services.NoQuotaSource: 409,
    ladder_services.BrokerUnavailable: 503,
    billing_services.CatalogEntryNotFound: 404,
    billing_services.PriceNotFound: 404,
    billing_services.Conflict: 409,
    billing_services.AliasNotFound: 404,
}
# Errors about one body field, answered as a 422 at that field.
FIELD_ERRORS: dict[type[Exception], str] = {CredentialKeyMissing: "credential"}
install_handlers(api, DOMAIN_STATUSES, FIELD_ERRORS)
api.add_router("", billing_router)
api.add_router("", alias_router)
for ladder_router in LADDER_ROUTERS:
    api.add_router("", ladder_router)
