"""Every file the code and the documentation cite is in the repository (issue #47).

The code's comments and docstrings, the README, the documentation site's sources and the
top-level pages it builds from (BENCHMARKS.md, SECURITY.md, RELIABILITY.md) name files:
a Markdown document (``docs/concepts.md``, ``SECURITY.md``) or a path of the repository
(``app/diagnose/hints.py``, ``deploy/kubernetes/phasewatch.yaml``). Each must exist —
relative to the repository, to the citing file's folder, or to ``docs/`` — so whoever
clones the repository can follow it. Links inside the site are checked by
``mkdocs build --strict`` (``make lint``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "gen"))

from hooks import GENERATED  # noqa: E402  (the site's pages made at build time)

# Names of files phasewatch writes (an export's download name, a CLI example's output),
# and a CSS selector: not citations.
NOT_CITATIONS = {"incident-summary.md", "incident.md", "pre.md"}

SOURCES = [
    *sorted((ROOT / "app").rglob("*.py")),
    *sorted((ROOT / "app").rglob("*.yaml")),
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "docs").rglob("*.yaml")),
    *sorted((ROOT / "docs").rglob("*.py")),
    ROOT / "README.md",
    ROOT / "BENCHMARKS.md",
    ROOT / "SECURITY.md",
    ROOT / "RELIABILITY.md",
    ROOT / "mkdocs.yml",
    ROOT / "Makefile",
    ROOT / "pyproject.toml",
]

# A Markdown document by name or path, or a path under one of the repository's folders.
_MD = re.compile(r"(?<![\w/.:-])((?:\.\.?/)*[\w.-]+(?:/[\w.-]+)*\.md)\b")
_PATH = re.compile(
    r"(?<![\w/.-])((?:app|tests|bench|docs|deploy|dashboards)/[\w./-]*\w"
    r"\.(?:py|ya?ml|json|sh|md|toml|txt))\b"
)
_URL = re.compile(r"[a-z]+://\S+")


def _exists(name: str, cited_in: Path) -> bool:
    if name in NOT_CITATIONS or name.removeprefix("docs/") in GENERATED:
        return True
    return any((base / name).exists() for base in (ROOT, cited_in.parent, ROOT / "docs"))


def _cited(path: Path) -> list[tuple[int, str]]:
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = _URL.sub("", line)
        for pattern in (_MD, _PATH):
            out += [(number, m.group(1)) for m in pattern.finditer(line)]
    out = list(dict.fromkeys(out))
    return out


def test_every_cited_file_exists() -> None:
    dangling = [
        f"{path.relative_to(ROOT)}:{number}: {name}"
        for path in SOURCES
        if path.exists()
        for number, name in _cited(path)
        if not _exists(name, path)
    ]
    assert not dangling, "files cited but not in the repository:\n" + "\n".join(dangling)


def test_the_check_finds_a_missing_document(tmp_path: Path) -> None:
    cited = tmp_path / "x.py"
    cited.write_text('"""The KV cache (physics.md, "The KV cache"); docs/concepts.md."""\n')
    assert [name for _, name in _cited(cited) if not _exists(name, cited)] == ["physics.md"]


def test_the_readme_is_a_front_door() -> None:
    """A screen or two: what it is, the two commands, a tour, links into the site."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text
