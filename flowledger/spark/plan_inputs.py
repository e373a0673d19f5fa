"""The written DataFrame's input files for `df.write.format("flowledger").save(...)`.

A Python data source sees rows, never the plan, so its driver-side `commit` cannot ask which files
the job read, and the RECEIVE half of the job's lineage would be lost. `install()` (run by
`register()` and so by `session()`) wraps PySpark's classic `DataFrameWriter.format`/`save` once
per process: when the format is flowledger, `save` passes `df.inputFiles()` to the data source as
the option `PLAN_INPUTS_OPTION` (JSON). The job's code is unchanged. An explicit `inputFiles`
option still wins. Spark Connect's writer is a different class and is not wrapped: there the job
names its inputs with `.option("inputFiles", ...)`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

PLAN_INPUTS_OPTION = "flowledger.planInputFiles"
_FORMAT_ATTR = "_flowledger_source"
_INSTALLED_ATTR = "_flowledger_plan_inputs"


def install() -> None:
    """Wrap `DataFrameWriter.format` and `save` (idempotent)."""
    from pyspark.sql.readwriter import DataFrameWriter

    if getattr(DataFrameWriter, _INSTALLED_ATTR, False):
        return
    original_format: Callable[..., Any] = DataFrameWriter.format
    original_save: Callable[..., Any] = DataFrameWriter.save

    @functools.wraps(original_format)
    def format(self: Any, source: str) -> Any:
        setattr(self, _FORMAT_ATTR, str(source))
        return original_format(self, source)

    @functools.wraps(original_save)
    def save(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: Any = None,
        **options: Any,
    ) -> None:
        source = format or getattr(self, _FORMAT_ATTR, "")
        if str(source).lower() == "flowledger" and PLAN_INPUTS_OPTION not in options:
            # inputFiles() is a driver-side plan walk: no job, no data read.
            options[PLAN_INPUTS_OPTION] = json.dumps([str(p) for p in self._df.inputFiles()])
        original_save(self, path, format, mode, partitionBy, **options)

    DataFrameWriter.format = format  # type: ignore[method-assign]
    DataFrameWriter.save = save  # type: ignore[method-assign]
    setattr(DataFrameWriter, _INSTALLED_ATTR, True)


def plan_input_files(options: Mapping[str, str]) -> tuple[str, ...]:
    """The input files `install()` passed, or () when the writer was not wrapped."""
    raw = options.get(PLAN_INPUTS_OPTION) or options.get(PLAN_INPUTS_OPTION.lower())
    if not raw:
        return ()
    return tuple(str(p) for p in json.loads(raw))
