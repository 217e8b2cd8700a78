"""CustomField JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def custom_field(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "order": row["position"]}
