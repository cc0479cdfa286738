"""What ``ivm status`` says of one view (or streaming table): the versions it reflects and
the newer ones it does not yet."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class ViewStatus:
    view: str
    refreshed: bool
    versions: dict[str, int]  # base table -> version the view reflects
    pending: dict[str, int]  # base table -> newer version not yet reflected
    rows: int | None
    now: datetime | None = None  # the time its filters on the current time were evaluated at
    policy: str = "AUTO"  # its REFRESH POLICY (or the project's default)
