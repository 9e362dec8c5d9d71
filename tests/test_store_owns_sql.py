"""The store owns its tables: no SQL, and no call that runs it, outside ``app/store``.

Every statement lives in a store module (``app/store/outbox.py``, ``silences.py``,
``alert_history.py``, ``diagnoses.py``…) behind typed methods; the rest of ``app`` calls
those. This reads the source of every other module of ``app`` and fails on a string that
looks like a statement or on a call of the connection's or store's raw access
(``fetchall``, ``execute``, ``transaction``…).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
STORE = APP / "store"

_SQL = re.compile(
    r"\bSELECT\s|\bINSERT\s|\bREPLACE\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\bPRAGMA\s|\b(?:CREATE|DROP)\s+(?:TABLE|INDEX|UNIQUE|VIEW|TRIGGER)\b|\bALTER\s+TABLE\b"
)
_RAW_CALLS = {
    "fetchall",
    "fetchone",
    "fetchmany",
    "execute",
    "executemany",
    "executescript",
    "transaction",
    "cursor",
}


def _texts(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal with its line; an f-string's pieces joined around ``{}``."""
    out: list[tuple[int, str]] = []
    inside_fstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [
                v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
                for v in node.values
            ]
            inside_fstrings.update(id(v) for v in node.values)
            out.append((node.lineno, "".join(parts)))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in inside_fstrings
        ):
            out.append((node.lineno, node.value))
    return out


def violations(source: str, name: str) -> list[str]:
    """What in ``source`` (a module outside the store) is SQL or runs it."""
    tree = ast.parse(source, name)
    found = [
        f"{name}:{line}: SQL {text[:60]!r}" for line, text in _texts(tree) if _SQL.search(text)
    ]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _RAW_CALLS
        ):
            found.append(f"{name}:{node.lineno}: .{node.func.attr}() outside app/store")
    return found


def _modules() -> list[Path]:
    return sorted(p for p in APP.rglob("*.py") if STORE not in p.parents)


def test_no_sql_outside_the_store() -> None:
    modules = _modules()
    assert len(modules) > 100  # the walk saw app/, not an empty folder
    found = [v for p in modules for v in violations(p.read_text(), str(p.relative_to(APP)))]
    assert found == [], "move these into a module of app/store:\n" + "\n".join(found)


def test_the_guard_sees_what_it_forbids() -> None:
    source = """
def f(store, conn, name):
    store.fetchall("SELECT a FROM t WHERE b = ?", (1,))
    with store.transaction("x") as conn:
        conn.executemany("DELETE FROM t WHERE a = ?", [])
    conn.execute(f"UPDATE {name} SET a = 1")
    sql = (
        "INSERT OR IGNORE INTO t(a) "
        "VALUES (?)"
    )
    return f"SELECT {name} FROM t", "PRAGMA user_version"
"""
    found = violations(source, "m.py")
    assert sum(": SQL " in v for v in found) == 5
    assert {v.split(": ", 1)[1] for v in found if ": SQL " not in v} == {
        ".fetchall() outside app/store",
        ".transaction() outside app/store",
        ".executemany() outside app/store",
        ".execute() outside app/store",
    }


def test_the_guard_lets_prose_and_http_methods_be() -> None:
    source = '''
"""DELETE removes a silence; select a target; UPDATE the page."""
METHODS = ["GET", "DELETE", "POST"]
'''
    assert violations(source, "m.py") == []
