"""ApiError and its kinds: raised from anywhere, turned into the JSON error body by middleware.

Body: {"errors": [readable messages], "code": machine code, "fields": {param: [problems]}}.
"""

from __future__ import annotations

from collections.abc import Mapping


class ApiError(Exception):
    status = 500
    code = "internal"
    default_message = "Internal server error"

    def __init__(
        self,
        *messages: str,
        fields: Mapping[str, list[str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.messages = list(messages) or [self.default_message]
        self.fields = dict(fields) if fields else None
        self.headers = dict(headers) if headers else {}
        super().__init__(self.messages[0])

    def body(self) -> dict[str, object]:
        out: dict[str, object] = {"errors": self.messages, "code": self.code}
        if self.fields:
            out["fields"] = self.fields
        return out


class BadRequest(ApiError):
    status = 400
    code = "bad_request"
    default_message = "Bad request"


class Unauthorized(ApiError):
    status = 401
    code = "unauthorized"
    default_message = "Authentication required"


class Forbidden(ApiError):
    status = 403
    code = "forbidden"
    default_message = "You are not allowed to do that"


class NotFound(ApiError):
    status = 404
    code = "not_found"
    default_message = "Not found"


class MethodNotAllowed(ApiError):
    status = 405
    code = "method_not_allowed"
    default_message = "Method not allowed"


class Conflict(ApiError):
    status = 409
    code = "conflict"
    default_message = "Already taken"


class TooLarge(ApiError):
    status = 413
    code = "too_large"
    default_message = "Request body too large"


class UnsupportedMediaType(ApiError):
    status = 415
    code = "unsupported_media_type"
    default_message = "Unsupported content type"


class Invalid(ApiError):
    status = 422
    code = "validation_failed"
    default_message = "Invalid parameters"

    @classmethod
    def field(cls, name: str, problem: str, message: str | None = None) -> Invalid:
        """One invalid parameter: `Invalid.field("message[body]", "can't be blank")`."""
        return cls(message or f"{_label(name)} {problem}", fields={name: [problem]})


class RateLimited(ApiError):
    status = 429
    code = "rate_limited"
    default_message = "Too many requests"

    def __init__(self, retry_after: int, message: str | None = None) -> None:
        super().__init__(
            message or self.default_message, headers={"Retry-After": str(max(1, retry_after))}
        )


class Unavailable(ApiError):
    """A service the request needs (PostgreSQL, the blob store) cannot be reached: try again."""

    status = 503
    code = "unavailable"
    default_message = "The service is temporarily unavailable, please try again shortly"
    retry_after = 5

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message or self.default_message, headers={"Retry-After": str(self.retry_after)}
        )


def _label(param: str) -> str:
    """`message[body]` -> `Body`, `user[first_name]` -> `First name` (Rails-style messages)."""
    leaf = param.rstrip("]").split("[")[-1]
    return leaf.replace("_", " ").capitalize()
