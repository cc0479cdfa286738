"""The JSON documents of `--json`: the same facts as the tables, for scripts and CI.

Each command prints exactly one document on standard output, always an object. A failure
prints ``{"error", "kind", "location", "hint"}`` instead (and the usual message on standard
error), with a non-zero exit code. Times are ISO 8601; decimals are strings, so no digit is
lost; other values a row may hold (dates, binary) are their text.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from ivm_sql.errors import IvmError
from ivm_sql.pipelines.python_datasets import PythonDataset
from ivm_sql.project import CompiledView
from ivm_sql.runtime.lifecycle import ViewState
from ivm_sql.runtime.log_reports import History
from ivm_sql.runtime.refresh import ViewReport
from ivm_sql.runtime.status import ViewStatus
from ivm_sql.runtime.verify import VerifyResult
from ivm_sql.runtime.watch import Round


def dumps(document: dict, lines: bool = False) -> str:
    """The document as JSON text; with ``lines``, on one line (JSON lines: `refresh --watch`
    prints one document per refresh)."""
    return json.dumps(document, default=_plain, indent=None if lines else 2, ensure_ascii=False)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value)


def refresh_document(reports: list[ViewReport]) -> dict:
    views = [{**dataclasses.asdict(r), "strategy": r.strategy} for r in reports]
    totals = {
        "views": len(reports),
        "rows_in": sum(r.rows_in for r in reports),
        "rows_out": sum(r.rows_out for r in reports),
        "seconds": sum(r.seconds for r in reports),
        **{
            action: sum(r.action == action for r in reports)
            for action in ("created", "recomputed", "incremental", "unchanged")
        },
    }
    return {"views": views, "totals": totals}


def python_datasets(datasets: Iterable[PythonDataset]) -> list[dict]:
    """A pipeline project's Python datasets, which spark-pipelines runs, not ivm: what the
    text output of compile, refresh and status says in a line each, as a list."""
    return [
        {"name": d.name, "kind": d.kind, "location": str(d.location), "note": d.describe()}
        for d in datasets
    ]


def watch_document(round: Round) -> dict:
    """One refresh of `ivm refresh --watch`: which it is, when it ended, its wall clock, the
    sources whose change started it (none in the first), whether the clock alone started it,
    then what `refresh_document` says."""
    changed = {
        table: {"from": old, "to": new} for table, (old, new) in sorted(round.changed.items())
    }
    return {
        "round": round.number,
        "at": round.at,
        "seconds": round.seconds,
        "changed": changed,
        "clock": round.clock,
        **refresh_document(round.reports),
    }


def status_document(statuses: list[ViewStatus], orphaned: list[ViewState]) -> dict:
    return {
        "views": [dataclasses.asdict(s) for s in statuses],
        "orphaned": [dataclasses.asdict(s) for s in orphaned],
    }


def history_document(history: History) -> dict:
    """`ivm history`: each refresh of a view (newest first) with its stages, and each view's
    efficiency."""
    refreshes = [
        {
            "refresh_id": e.refresh_id,
            "clock": e.clock,
            "view": e.view,
            "strategy": e.strategy,
            "outcome": e.outcome,
            "reason": e.reason,
            "rows_in": e.rows_in,
            "rows_out": e.rows_out,
            "seconds": e.seconds,
            "stages": [dataclasses.asdict(s) for s in e.stages],
        }
        for e in history.refreshes
    ]
    efficiency = [{**dataclasses.asdict(e), "ratio": e.ratio} for e in history.efficiency]
    return {"refreshes": refreshes, "efficiency": efficiency}


def compile_document(compiled: list[CompiledView]) -> dict:
    return {"views": [dataclasses.asdict(c) for c in compiled]}


def verify_document(results: list[VerifyResult]) -> dict:
    views = [{**dataclasses.asdict(r), "skipped": r.ok and bool(r.problem)} for r in results]
    return {"ok": all(r.ok for r in results), "views": views}


def error_document(error: IvmError) -> dict:
    location = str(error.location) if error.location else None
    return {"error": error.message, "kind": error.kind, "location": location, "hint": error.hint}
