"""Per-run GX Data Docs: the merged results of an ingest run's
:class:`~nodewatch.tasks.core.validate.BatchValidator` objects rendered as a static site.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from nodewatch.tasks.core.validate import _LOCK, BatchValidator, gx_context


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
                ctx.validation_results_store.set(key, v.merged)
                keys.append(key)
            ctx.build_data_docs(site_names=[site], resource_identifiers=keys)
        finally:
            ctx.delete_data_docs_site(site)
    index = directory / "index.html"
    return index if index.exists() else None
