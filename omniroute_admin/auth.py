"""Bearer-token auth for the API: header tokens only (never cookies), scope checked
before the body is validated (ninja runs auth first)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.errors import AuthorizationError
from ninja.security import HttpBearer

from ladder.models import ApiToken
from ladder.tokens import authenticate


class TokenAuth(HttpBearer):
    """Accepts a live token whose scope allows `scope`; a valid token of a narrower
    scope is a 403, an unknown or revoked one a 401."""

    def __init__(self, scope: str) -> None:
        super().__init__()
        self.scope = scope

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        found = authenticate(token)
        if found is None:
            return None
        if not found.allows(self.scope):
            raise AuthorizationError(
                message=f"This endpoint needs a token with the {self.scope} scope."
            )
        return found


gateway_auth = TokenAuth(ApiToken.Scope.GATEWAY)
operator_auth = TokenAuth(ApiToken.Scope.OPERATOR)


def actor_of(request: HttpRequest) -> str:
    """The audit actor of an API request: the token's name."""
    token = getattr(request, "auth", None)
    return f"token:{token.name}" if isinstance(token, ApiToken) else "api"
