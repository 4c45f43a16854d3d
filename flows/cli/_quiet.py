"""Prefect log records of a flow or task that failed with a *user* error carry no traceback.

Prefect logs "Encountered exception during execution" with the full traceback (and the task/flow
"Finished in state Failed" line) before the exception reaches :func:`nodewatch.flows.cli.main`, which
prints the one-line message. For user errors (input, settings, names, locks, …) that traceback is noise
and breaks the "one line, no traceback" rule, so the filter installed here drops those records; records
of any other exception are left untouched (a bug keeps its traceback).
"""

from __future__ import annotations

import logging

_LOGGERS = ("prefect.flow_runs", "prefect.task_runs", "prefect.engine", "prefect")


class UserErrorFilter(logging.Filter):
    """Drop log records whose exception (``exc_info``) is one of ``errors``, or that report a state failed by one."""

    def __init__(self, errors: tuple[type[BaseException], ...]) -> None:
        super().__init__()
        self.errors = errors
        self.names = tuple(e.__name__ for e in errors)

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - logging API
        """False (drop) for a record about a user error."""
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and isinstance(exc, self.errors):
            return False
        if exc is None:
            msg = record.getMessage()
            if "Finished in state Failed" in msg and any(f"{n}:" in msg for n in self.names):
                return False
        return True


def quiet_user_errors(errors: tuple[type[BaseException], ...]) -> None:
    """Install :class:`UserErrorFilter` on Prefect's run loggers and on every handler that prints them."""
    flt = UserErrorFilter(errors)
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(flt)
    _HANDLER_FILTERS.append(flt)
    _patch_handlers()


_HANDLER_FILTERS: list[UserErrorFilter] = []


def _patch_handlers() -> None:
    """Add the filters to the handlers Prefect configured (records propagate from child loggers to them)."""
    for name in ("", *_LOGGERS):
        for h in logging.getLogger(name).handlers:
            for flt in _HANDLER_FILTERS:
                if flt not in h.filters:
                    h.addFilter(flt)
