"""The `/metrics` reference names every class ``phasewatch_diagnosis`` exports (issue #44
item 6: it listed 7 where 10 are exported)."""

from __future__ import annotations

import re
from pathlib import Path

from app.diagnose.classes import DiagnosisClass

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
WORDS = {"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11}


def test_the_diagnosis_gauge_row_lists_every_exported_class() -> None:
    (row,) = [ln for ln in DOC.read_text().splitlines() if ln.startswith("| `phasewatch_diagnosis")]
    listed = set(re.findall(r"`([a-z_]+)`", row.split("|")[2]))
    exported = {c.value for c in DiagnosisClass}
    assert exported <= listed, exported - listed
    others = re.search(r"0 for the (\w+) others", row)
    assert others is not None and WORDS[others.group(1)] == len(exported) - 1
