"""Where a stage keeps its new record when its change came to nothing.

A stage's table is the integral of its change stream (DBSP's I operator): after a refresh it
must reflect the new versions of its sources, or the next refresh would read the same
changes again. When the change consolidates to nothing (rows that came and went, a change
no row of the stage depends on), the table is already that integral at both the old and the
new versions: ΔV = 0, so I(V) does not move. Only the record of the versions has to.

A commit to the stage's table can carry it (an INSERT of no row, conditional on the txn
version like every ivm commit: ``storage.concurrent``), but that commit costs what any
Delta commit costs, 0.5-0.9 s on this machine, and adds a version to the table. So when the
refresh is logged, the record goes into the event log's one append instead
(``storage.refresh_log``'s summary), where it holds while the stage's table stays at the
version it names. Nothing in that is needed for a right result: a record that is lost (an
append that fails, a refresh killed before it) or stale (any commit to the table since)
leaves the stage's own commit's record, which is valid too, and the next refresh reads the
changes since it again, which still come to nothing on these rows. Readers that do not look
beside (``verify``, the retention of old versions) see that older record, equally right.

A record that names stages read through their queries (``one_statement.INLINED``: the view's
table was written in one statement) still goes into a commit: whether the stages behind it
wait is decided from that commit's record.
"""

from __future__ import annotations

from ivm_sql.physical.one_statement import INLINED


def kept_beside(logged: bool, record: dict) -> bool:
    """Whether the new record of a stage whose change came to nothing goes into the event
    log's append (``logged``: the refresh has one) rather than a commit to its table; ``record``
    is the stage's newest record so far."""
    return logged and INLINED not in record


def describe() -> str:
    return (
        "an empty change skips the MERGE and only records the new versions, in the refresh's "
        "append to the event log (with the log off, a commit of no row)"
    )
