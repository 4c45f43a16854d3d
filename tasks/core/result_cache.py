"""A results cache that cannot run code: plain JSON in the store, read back as data only.

Prefect's result persistence reads the serializer from the result file itself, so anyone who can
replace a file under ``PREFECT_HOME/storage`` chooses ``pickle`` and runs code in the next flow that
hits the cache. Tasks that need "a re-run resumes where it failed" cache their (JSON-able) outputs
here instead:

* ``cache/results/<sha256 of key>.json`` in the store: ``{"written": ISO time, "value": ...}``;
* values are JSON with two tagged types, ``{"$date": "YYYY-MM-DD"}`` and ``{"$datetime": ISO}``
  (read back as :class:`datetime.date` / UTC :class:`pandas.Timestamp`); no other tag is interpreted,
  nothing is imported, no constructor is called — a tampered file is data (wrong numbers at worst,
  caught by the checks downstream) or a cache miss;
* an unreadable, malformed or expired entry is a miss.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

from nodewatch.tasks.core.store import Store

AREA = ("cache", "results")


def cache_parts(key: str) -> tuple[str, ...]:
    """Store key parts of the cache entry of ``key`` (hashed: any key is a safe file name)."""
    return (*AREA, hashlib.sha256(key.encode()).hexdigest() + ".json")


def _encode(obj: Any) -> Any:
    import numpy as np
    import pandas as pd

    if isinstance(obj, dict):
        return {str(k): _encode(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_encode(v) for v in obj]
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return obj
    if isinstance(obj, np.generic):
        return _encode(obj.item())
    if isinstance(obj, pd.Timestamp | datetime):
        if pd.isna(obj):
            return None
        t = pd.Timestamp(obj)
        return {"$datetime": (t if t.tzinfo else t.tz_localize("UTC")).isoformat()}
    if isinstance(obj, date):
        return {"$date": obj.isoformat()}
    raise TypeError(f"cannot cache a {type(obj).__name__} as JSON")


def _decode_object(pairs: list[tuple[str, Any]]) -> Any:
    import pandas as pd

    if len(pairs) == 1:
        k, v = pairs[0]
        if k == "$date" and isinstance(v, str):
            return date.fromisoformat(v)
        if k == "$datetime" and isinstance(v, str):
            return pd.Timestamp(v).tz_convert("UTC")
    return dict(pairs)


def save_result(store: Store, key: str, value: Any) -> None:
    """Cache ``value`` (JSON-able plus dates/times) under ``key`` (atomic write)."""
    doc = {"written": datetime.now(UTC).isoformat(), "value": _encode(value)}
    store.write_bytes(json.dumps(doc, allow_nan=True).encode(), *cache_parts(key))


def load_result(store: Store, key: str, max_age: timedelta) -> Any | None:
    """The cached value of ``key``, or ``None`` if absent, unreadable, malformed or older than ``max_age``."""
    parts = cache_parts(key)
    if not store.exists(*parts):
        return None
    try:
        with store.fs.open(store.path(*parts), "rb") as f:
            doc = json.loads(f.read().decode("utf-8"), object_pairs_hook=_decode_object)
        written = datetime.fromisoformat(doc["written"])
        if not isinstance(doc, dict) or "value" not in doc:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return None
    age = datetime.now(UTC) - (written if written.tzinfo else written.replace(tzinfo=UTC))
    if age > max_age:
        return None
    return doc["value"]
