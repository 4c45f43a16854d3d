"""``--json`` output shared by the command groups: one strict JSON document on stdout."""

from __future__ import annotations

import json
import math
import sys
from typing import Annotated, Any

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout (nothing else on stdout).")]


def jsonable(obj: Any) -> Any:
    """Plain JSON values: numpy scalars/arrays to Python, NaN and infinities to null, keys to strings."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [jsonable(v) for v in obj]
    np = sys.modules.get("numpy")  # numpy values only exist when numpy was imported
    if np is not None:
        if isinstance(obj, np.ndarray):
            return jsonable(obj.tolist())
        if isinstance(obj, np.generic):
            obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _default(o: Any) -> Any:
    if hasattr(o, "isoformat"):
        return o.isoformat()
    return str(o)


def print_json(obj: Any) -> None:
    """Write ``obj`` as one JSON document to stdout (strict JSON: no NaN; dates as ISO text)."""
    sys.stdout.write(json.dumps(jsonable(obj), indent=2, allow_nan=False, default=_default) + "\n")
    sys.stdout.flush()
