"""Running a flow's steps without Prefect when no Prefect server is configured (no ``prefect`` import here).

Without a configured API, every Prefect flow run starts Prefect's temporary server first: ~10-13 s on
a 2-core machine for a command whose work takes ~1 s. The CLI therefore runs a flow's plain body
(the same :mod:`nodewatch.tasks` steps, the same run manifest and row accounting) when no server is
configured, writes what would have been Prefect artifacts as markdown files under
``runs/artifacts/<run_id>/`` and says so in one line (:func:`note`). With a configured server
(``PREFECT_API_URL`` in the environment, the active Prefect profile, ``prefect.toml``, ``.env``, or an
in-process harness such as ``prefect_test_harness``) it runs the Prefect flow, so the server keeps the
full history. ``--prefect`` / ``--no-prefect`` force either mode (docs/operations.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from nodewatch.tasks.core.store import Store

ARTIFACTS = ("runs", "artifacts")


def _mentions_api_url(path: Path, marker: str = "PREFECT_API_URL") -> bool:
    try:
        return path.is_file() and marker.lower() in path.read_text(errors="replace").lower()
    except OSError:
        return False


def _maybe_configured_in_files() -> bool:
    """Whether a Prefect settings file could set an API URL (then Prefect itself is asked)."""
    home = Path(os.path.expanduser(os.environ.get("PREFECT_HOME") or "~/.prefect"))
    cwd = Path.cwd()
    return (
        _mentions_api_url(Path(os.path.expanduser(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml")))
        or _mentions_api_url(cwd / ".env")
        or _mentions_api_url(cwd / "prefect.toml", "api")
        or _mentions_api_url(cwd / "pyproject.toml", "tool.prefect")
    )


def prefect_api_url() -> str | None:
    """The Prefect API this process would talk to, or ``None`` when none is configured.

    Cheap in the common case: the environment, then Prefect's own settings only if ``prefect`` is
    imported already (a test harness sets the URL in-process) or a settings file mentions an API URL.
    """
    url = os.environ.get("PREFECT_API_URL")
    if url:
        return url
    if "prefect" in sys.modules or _maybe_configured_in_files():
        from prefect.settings import PREFECT_API_URL

        return PREFECT_API_URL.value() or None
    return None


def use_prefect(flag: bool | None) -> tuple[bool, str]:
    """Whether to run the Prefect flow: ``flag`` if given (``--prefect``/``--no-prefect``), else whether an
    API is configured; and the reason, for :func:`note` (``"--no-prefect"`` or ``"no server configured"``)."""
    if flag is not None:
        return flag, ("--prefect" if flag else "--no-prefect")
    url = prefect_api_url()
    return (True, f"server {url}") if url else (False, "no server configured")


def note(reason: str, run_id: str, artifacts: list[str]) -> str:
    """The one-line note printed after a run without Prefect."""
    where = f"; artifacts {artifacts[0]}" + (f" (+{len(artifacts) - 1})" if len(artifacts) > 1 else "") if artifacts else ""
    return (f"ran without Prefect ({reason}): no flow run recorded, manifest runs/{run_id}.json{where}; "
            "set PREFECT_API_URL or pass --prefect for a Prefect flow run")


def write_artifact(store: Store, run_id: str, key: str, markdown: str) -> str:
    """Write one markdown artifact of a run without Prefect to ``runs/artifacts/<run_id>/<key>.md``; its URL."""
    store.write_bytes(markdown.encode(), *ARTIFACTS, run_id, f"{key}.md")
    return store.url_of(*ARTIFACTS, run_id, f"{key}.md")
