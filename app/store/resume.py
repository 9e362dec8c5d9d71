"""Repository over ``resume_state``: state a stopping service leaves for the next start.

A row per kind of state (``name``), with when it was taken and a fingerprint of what it
depends on (code version, configuration) chosen by the caller. :meth:`ResumeStore.take`
reads a row and deletes it in one transaction, so a state is resumed at most once: a
service that crashes later starts from the store alone, not from an older stop's state.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.store.sqlite import Store

__all__ = ["ResumeState", "ResumeStore"]


@dataclass(frozen=True, slots=True)
class ResumeState:
    taken: float
    fingerprint: str
    payload: bytes


class ResumeStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def put(self, name: str, state: ResumeState) -> None:
        """Keep ``state`` under ``name`` (replacing what was kept)."""
        with self.store.transaction("resume") as conn:
            conn.execute(
                "INSERT OR REPLACE INTO resume_state VALUES (?,?,?,?)",
                (name, state.taken, state.fingerprint, state.payload),
            )

    def take(self, name: str) -> ResumeState | None:
        """The state kept under ``name``, removed from the store; None when there is none."""
        with self.store.transaction("resume") as conn:
            row = conn.execute(
                "SELECT taken, fingerprint, payload FROM resume_state WHERE name = ?", (name,)
            ).fetchone()
            if row is None:
                return None
            conn.execute("DELETE FROM resume_state WHERE name = ?", (name,))
        taken, fingerprint, payload = row
        return ResumeState(float(taken), str(fingerprint), bytes(payload))
