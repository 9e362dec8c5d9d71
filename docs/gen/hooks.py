"""MkDocs hooks (``hooks:`` in mkdocs.yml): the pages generated when the site is built.

- ``reference/configuration.md`` from the pydantic models (``config_ref``) and
  ``reference/cli.md`` from the argparse parsers (``cli_ref``): a setting or a flag
  without a description fails the build;
- ``openapi.json``: the API's OpenAPI schema, as ``create_app`` serves it at
  ``/openapi.json`` (the service is not started);
- ``benchmarks.md``, ``security.md`` and ``reliability.md`` from the repository's
  ``BENCHMARKS.md``, ``SECURITY.md`` and ``RELIABILITY.md`` (kept at the top of the
  repository, where people look for them), their links pointed at the site's pages.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import cli_ref  # noqa: E402
import config_ref  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402

# The repository's top-level Markdown files, as the site names them.
TOP = {
    "README.md": "index.md",
    "BENCHMARKS.md": "benchmarks.md",
    "SECURITY.md": "security.md",
    "RELIABILITY.md": "reliability.md",
}
_LINK = re.compile(r"\[([^\]]*)\]\(([^)#\s]+)(#[^)\s]*)?\)")


def top_level_page(name: str) -> str:
    """A top-level file's text with its links pointed at the site: another top-level
    file → its page, a link into ``docs/`` → the page itself; a link to any other file of the
    repository becomes its path in a code span (the site does not serve the code)."""

    def fix(m: re.Match[str]) -> str:
        text, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        if re.match(r"[a-z]+:", target):
            return m.group(0)
        if target in TOP:
            return f"[{text}]({TOP[target]}{anchor})"
        if target.startswith("docs/"):
            return f"[{text}]({target[len('docs/') :]}{anchor})"
        return text if text.strip("`") == target else f"{text} (`{target}`)"

    return _LINK.sub(fix, (ROOT / name).read_text())


def openapi() -> str:
    """The OpenAPI schema of the API, from the app as the service builds it."""
    from app.config import Settings
    from app.main import create_app

    app = create_app(Settings(storage={"path": ":memory:"}))
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"


# The pages made at build time, by path in the site, and what makes each.
GENERATED = {
    "reference/configuration.md": config_ref.render,
    "reference/cli.md": cli_ref.render,
    "openapi.json": openapi,
    **{
        page: (lambda name=name: top_level_page(name))
        for name, page in TOP.items()
        if page != "index.md"
    },
}


def on_files(files: Files, config: Any) -> Files:
    generated = {path: make() for path, make in GENERATED.items()}
    for path, content in generated.items():
        files.append(File.generated(config, path, content=content))
    return files
