"""Errors as OpenAI's API reports them, so clients show the message instead of a parse error:
{"error": {"message", "type", "param", "code"}}, with Anthropic's `"type": "error"` beside it
(its clients read the same `error.type` and `error.message`): one shape every dialect reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 405: "invalid_request_error", 413: "invalid_request_error",
          429: "rate_limit_error", 503: "server_error"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.param, self.code)

    def response(self, headers: Mapping[str, str] | None = None) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def error_body(status: int, message: str, param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"type": "error", "error": {"message": message,
                                       "type": _TYPES.get(status, "server_error"),
                                       "param": param, "code": code}}


async def api_error_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def http_error_handler(_request: Request, exc: Exception) -> Response:
    """Starlette's own 404 / 405, in the same shape."""
    assert isinstance(exc, HTTPException)
    return ApiError(exc.status_code, exc.detail, code=None).response(exc.headers)


async def unexpected_error_handler(_request: Request, _exc: Exception) -> Response:
    """A bug: a plain sentence for the client, the traceback only in the server's log."""
    return ApiError(500, "The server failed to answer this request.").response()
