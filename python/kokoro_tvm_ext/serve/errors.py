"""Errors in OpenAI's JSON shape: ``{"error": {"message", "type", "param", "code"}}``.

Bad input is a 4xx with a message naming the problem and the fix. The package's own
errors (``kokoro_tvm_ext.support.errors``) answer with their class's ``http_status`` (a missing or
damaged asset is a 503 whose body names what failed and the request id, the details being in the
log, a cancelled request 499); anything else is a bug, which the request
guard (``guard.py``) logs with its traceback and answers with a 500 that holds only the
request id. No error stops the server.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from kokoro_tvm_ext.support.errors import (
    ArtifactError,
    AssetError,
    InvalidInputError,
    InvalidVoiceError,
    KokoroError,
    RequestCancelled,
    UnknownVoiceError,
    UnsupportedCPUError,
)

log = logging.getLogger("kokoro_tvm_ext.serve")


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str = "invalid_request_error",
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type


def error_response(
    status: int, message: str, *, type: str = "invalid_request_error", param=None, code=None, headers=None
) -> JSONResponse:
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


# OpenAI's error ``code`` for our error classes: the entry of the nearest class in the MRO.
_CODES = {
    UnknownVoiceError: "voice_not_found",
    InvalidVoiceError: "invalid_voice",
    InvalidInputError: "invalid_value",
    RequestCancelled: "request_cancelled",
}


# What a client is told of a server-side error (5xx), by class: the details (paths, hashes) are the
# operator's, in the log under the request id.
_SERVER_SIDE = {
    AssetError: "the server's speech assets (weights, voices, G2P data) are missing or damaged",
    ArtifactError: "the server's compiled model cannot be loaded",
    UnsupportedCPUError: "the server's compiled model does not run on its CPU",
}


def _by_nearest_class(table: dict, exc: Exception, default):
    """``table``'s entry for the nearest class of ``exc`` in its MRO, else ``default``."""
    return next((table[cls] for cls in type(exc).__mro__ if cls in table), default)


def kokoro_error_response(exc: KokoroError, request_id: str = "-") -> JSONResponse:
    """The answer to one of our errors, by its class: its ``http_status``, and its request field if known.
    A client's error (4xx) says what to fix; a server-side one says what failed and the request id only."""
    code = _by_nearest_class(_CODES, exc, None)
    if exc.http_status < 500:
        return error_response(exc.http_status, str(exc), param=exc.param, code=code)
    what = _by_nearest_class(_SERVER_SIDE, exc, "the server failed")
    message = f"{what}; request id {request_id} (the server's log has the details)"
    return error_response(exc.http_status, message, type="server_error", code=code)


def _validation_message(err: dict) -> tuple[str, str | None]:
    loc = [str(p) for p in err.get("loc", ()) if p != "body"]
    param = ".".join(loc) or None
    msg = err.get("msg", "invalid value").removeprefix("Value error, ")
    if err.get("type") == "json_invalid":
        return "the request body is not valid JSON", None
    if err.get("type") == "model_attributes_type":
        return "the request body must be a JSON object", None
    return (f"{param}: {msg}" if param else msg), param


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return error_response(exc.status, exc.message, type=exc.type, param=exc.param, code=exc.code)


async def _ours(request: Request, exc: KokoroError) -> JSONResponse:
    context = request.scope.get("state", {}).get("request_context")
    rid = context.id if context else "-"
    if exc.http_status >= 500:  # the install's or the server's problem, not the request's
        log.error("request %s: %s %s: %s: %s", rid, request.method, request.url.path, type(exc).__name__, exc)
    return kokoro_error_response(exc, rid)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    message, param = _validation_message(errors[0]) if errors else ("invalid request", None)
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return error_response(400, message, param=param, code="invalid_value")


async def _http(request: Request, exc: HTTPException) -> JSONResponse:
    kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
    return error_response(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", type=kind)


def install(app: FastAPI) -> None:
    """Answer ``ApiError``, our errors, invalid request bodies and Starlette's 404/405 in OpenAI's shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(KokoroError, _ours)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
