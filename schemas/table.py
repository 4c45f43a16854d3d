"""Declarative table schemas: the single source of truth for staged tables.

A :class:`TableSchema` lists its :class:`Column` definitions. From it we derive

* the Arrow schema used to write staged parquet (:meth:`TableSchema.arrow_schema`),
* the Great Expectations suite used to validate rows (:func:`nodewatch.schemas.gx_suite.build_suite`),
* the column reference in ``docs/`` (:meth:`TableSchema.markdown`).

Expectations are described here as plain data (:class:`Expectation`) so this module does not
import Great Expectations (which takes seconds to import).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from nodewatch.schemas.names import NODE_NAME_MAX_LEN, NODE_NAME_PATTERN


@dataclass(frozen=True)
class Column:
    """One column of a staged table.

    Attributes:
        name: column name.
        type: Arrow data type.
        nullable: whether nulls are allowed (a not-null expectation is generated otherwise).
        min / max: inclusive valid range (a between expectation is generated).
        allowed: finite set of allowed values.
        regex: pattern every non-null value must match.
        unit: physical unit (CF style, e.g. ``"s"``, ``"W"``), documentation only.
        description: human description for docs.
    """

    name: str
    type: pa.DataType
    nullable: bool = True
    min: Any = None
    max: Any = None
    allowed: tuple[Any, ...] | None = None
    regex: str | None = None
    unit: str | None = None
    description: str = ""


@dataclass(frozen=True)
class Expectation:
    """A GX expectation described as data: ``type`` is the GX class name."""

    type: str
    kwargs: dict[str, Any]

    @property
    def label(self) -> str:
        """Short human label used as quarantine reason, e.g. ``expect_column_values_to_not_be_null(node)``."""
        snake = "".join("_" + c.lower() if c.isupper() else c for c in self.type).lstrip("_")
        target = self.kwargs.get("column") or ",".join(self.kwargs.get("column_list", []))
        if "column_A" in self.kwargs:
            target = f"{self.kwargs['column_A']}>={self.kwargs['column_B']}"
        return f"{snake}({target})"


@dataclass(frozen=True)
class TableSchema:
    """A staged table: columns, uniqueness key, the time column used for date partitions."""

    name: str
    columns: tuple[Column, ...]
    time_column: str
    unique_key: tuple[str, ...]
    description: str = ""
    extra_expectations: tuple[Expectation, ...] = field(default_factory=tuple)

    def column(self, name: str) -> Column:
        """Return the column called ``name``."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        """Column names in order."""
        return [c.name for c in self.columns]

    def arrow_schema(self) -> pa.Schema:
        """Arrow schema for the staged parquet files."""
        return pa.schema(
            [pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns],
            metadata={b"nodewatch.table": self.name.encode()},
        )

    def expectations(self) -> list[Expectation]:
        """Row-level expectations derived from the column definitions (plus ``extra_expectations``)."""
        out: list[Expectation] = []
        for c in self.columns:
            if not c.nullable:
                out.append(Expectation("ExpectColumnValuesToNotBeNull", {"column": c.name}))
            if c.min is not None or c.max is not None:
                out.append(
                    Expectation(
                        "ExpectColumnValuesToBeBetween",
                        {"column": c.name, "min_value": c.min, "max_value": c.max},
                    )
                )
            if c.allowed is not None:
                out.append(
                    Expectation("ExpectColumnValuesToBeInSet", {"column": c.name, "value_set": list(c.allowed)})
                )
            if c.regex is not None:
                out.append(Expectation("ExpectColumnValuesToMatchRegex", {"column": c.name, "regex": c.regex}))
                if c.regex == NODE_NAME_PATTERN:
                    out.append(
                        Expectation(
                            "ExpectColumnValueLengthsToBeBetween",
                            {"column": c.name, "min_value": 1, "max_value": NODE_NAME_MAX_LEN},
                        )
                    )
        out.extend(self.extra_expectations)
        return out

    def markdown(self) -> str:
        """Markdown reference table of the columns (used to generate docs)."""
        lines = [f"### `{self.name}`", "", self.description, ""]
        lines += ["| column | type | null | range / set | unit | description |", "|---|---|---|---|---|---|"]
        for c in self.columns:
            rng = ""
            if c.min is not None or c.max is not None:
                rng = f"[{c.min if c.min is not None else '-inf'}, {c.max if c.max is not None else 'inf'}]"
            if c.allowed is not None:
                rng = ", ".join(map(str, c.allowed))
            if c.regex:
                rng = "`" + c.regex.replace("|", "\\|") + "`"
            lines.append(
                f"| {c.name} | {c.type} | {'yes' if c.nullable else 'no'} | {rng} | {c.unit or ''} | {c.description} |"
            )
        lines.append("")
        lines.append(f"Unique key: ({', '.join(self.unique_key)}); partitioned by date of `{self.time_column}`.")
        return "\n".join(lines)
