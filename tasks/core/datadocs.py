"""Per-run GX Data Docs: the merged results of an ingest run's
:class:`~nodewatch.tasks.core.validate.BatchValidator` objects rendered as a static site.

GX renders the values it reports (unexpected values, observed values, exception messages) into the
HTML *without escaping*: a ticket id ``<img src=x onerror=alert(1)>`` ran its script when the page was
opened. Every string in every expectation result therefore goes through
:func:`nodewatch.tasks.core.escape.html_text` before rendering (:func:`escaped_result`), and the written
pages are checked afterwards (:func:`check_pages`): a raw ``<`` of an input value left in a page is an error.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodewatch.tasks.core.escape import html_text
from nodewatch.tasks.core.validate import _LOCK, BatchValidator, gx_context


def _escape_strings(obj: Any) -> Any:
    """Every ``str`` inside ``obj`` (dicts, lists, tuples; keys too) HTML-escaped; other values unchanged."""
    if isinstance(obj, str):
        return html_text(obj)
    if isinstance(obj, dict):
        return {(html_text(k) if isinstance(k, str) else k): _escape_strings(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_escape_strings(v) for v in obj)
    return obj


def escaped_result(merged: Any) -> Any:
    """A copy of a GX suite validation result whose values from the data are HTML-escaped.

    The ``result`` (unexpected lists and counts, observed values, details) and ``exception_info`` of each
    expectation come from the data; the expectation's own configuration (column names, value sets of the
    schema) does not and is kept as written.
    """
    out = copy.deepcopy(merged)
    for r in out.results:
        r.result = _escape_strings(dict(r.result or {}))
        if getattr(r, "exception_info", None):
            r.exception_info = _escape_strings(r.exception_info)
    return out


_TAG = re.compile(r"<\s*/?\s*([A-Za-z][A-Za-z0-9-]*)")


def unescaped_values(merged: Any) -> set[str]:
    """The strings of ``merged``'s results that would be markup if written raw (contain ``<tag`` or ``&``-free ``<``)."""
    found: set[str] = set()

    def walk(o: Any) -> None:
        if isinstance(o, str):
            if "<" in o or ">" in o:
                found.add(o)
        elif isinstance(o, dict):
            for k, v in o.items():
                walk(k)
                walk(v)
        elif isinstance(o, list | tuple):
            for v in o:
                walk(v)

    for r in merged.results:
        walk(r.result or {})
        walk(getattr(r, "exception_info", None) or {})
    return found


def check_pages(directory: Path, raw_values: set[str]) -> None:
    """Raise ``RuntimeError`` if any HTML page under ``directory`` contains one of ``raw_values`` unescaped."""
    if not raw_values:
        return
    for page in directory.rglob("*.html"):
        text = page.read_text(errors="replace")
        for v in raw_values:
            if _TAG.search(v) and v in text:
                raise RuntimeError(f"Data Docs page {page} contains an unescaped input value: {v[:60]!r}")


def write_data_docs(validators: Sequence[BatchValidator], run_id: str, directory: Path) -> Path | None:
    """Render the merged results of ``validators`` as a static GX Data Docs site in ``directory``.

    Returns the path of ``index.html`` (``None`` if nothing was validated).
    """
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    results = [v for v in validators if v.merged is not None]
    if not results:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    ctx = gx_context()
    site = f"run-{run_id}"
    with _LOCK:
        ctx.add_data_docs_site(
            site_name=site,
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(directory)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        try:
            keys = []
            for v in results:
                key = ValidationResultIdentifier(
                    expectation_suite_identifier=ExpectationSuiteIdentifier(name=v.suite_name),
                    run_id=RunIdentifier(run_name=run_id, run_time=datetime.now(UTC)),
                    batch_identifier=v.schema.name,
                )
                ctx.validation_results_store.set(key, escaped_result(v.merged))
                keys.append(key)
            ctx.build_data_docs(site_names=[site], resource_identifiers=keys)
        finally:
            ctx.delete_data_docs_site(site)
    check_pages(directory, set().union(*(unescaped_values(v.merged) for v in results)))
    index = directory / "index.html"
    return index if index.exists() else None
