"""Reading one field of an untrusted JSON body, for every dialect: a wrong type, NaN or a value
out of range is a 400 naming the field, never an exception further in."""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from typing import Any

from inglenook.server.errors import ApiError


def parse_json(body: bytes) -> Any:
    """JSON as the standard defines it: NaN and Infinity (which Python accepts) are refused."""
    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        return json.loads(body, parse_constant=no_constants)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ApiError(400, f"The body is not valid JSON ({short(exc)}).",
                       code="invalid_json") from None


def only_known(body: dict[str, Any], known: Collection[str], where: str = "") -> None:
    """A field this server does not know is refused by name, never passed over in silence."""
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        name = f"{where}.{unknown[0]}" if where else unknown[0]
        raise ApiError(400, f"'{name}' is not supported by this server.", param=name,
                       code="unsupported_parameter")


def number(body: dict[str, Any], name: str, minimum: float, maximum: float,
           integer: bool = False, shown: str = "") -> float | int | None:
    value = body.get(name)
    if value is None:
        return None
    if integer and isinstance(value, float) and value.is_integer():
        value = int(value)
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if (isinstance(value, bool) or not ok_type or not math.isfinite(value)
            or not minimum <= value <= maximum):
        raise ApiError(400, f"'{shown or name}' must be {kind} from {show(minimum)} to "
                       f"{show(maximum)}.", param=shown or name, code="invalid_value")
    return value


def boolean(body: dict[str, Any], name: str, shown: str | None = None,
            default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"'{shown or name}' must be true or false.", param=shown or name)
    return value


def text(body: dict[str, Any], name: str, limit: int, shown: str = "") -> str:
    value = body.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise ApiError(400, f"'{shown or name}' must be text of at most {limit} characters.",
                       param=shown or name)
    return value


def obj(data: Any, where: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ApiError(400, f"'{where}' must be an object." if where
                       else "The body must be a JSON object.", param=where or None)
    return data


def listed(data: Any, where: str, limit: int = 10_000) -> list[Any]:
    if not isinstance(data, list) or len(data) > limit:
        raise ApiError(400, f"'{where}' must be a list of at most {limit:,} items.", param=where)
    return data


def show(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def short(exc: BaseException) -> str:
    return str(exc)[:200] or type(exc).__name__
