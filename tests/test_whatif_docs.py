"""Every ``phasewatch whatif`` example of docs/whatif.md runs as written, on a short
simulator recording: the folder stands for the recording, the URL for a watched server,
the config's target for the store (its times for the recording's)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

import app.cli.whatif as cli_whatif
from app.cli import main
from app.sim.record import record
from app.sources.recording import ReplayedScrapes, read_scrapes, record_into
from app.store.sqlite import Store

DOC = Path(__file__).resolve().parents[1] / "docs" / "whatif.md"
START = 1_764_403_200.0
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


def examples() -> list[str]:
    """The ``phasewatch whatif`` lines of the page's code blocks."""
    blocks = FENCE.findall(DOC.read_text())
    return [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip().startswith("phasewatch whatif")
    ]


def test_the_page_has_examples() -> None:
    found = examples()
    assert len(found) >= 5, found
    assert any("gpu_memory_utilization" in e and "--params" in e for e in found)
    assert not any("--gpu " in e for e in found if "gpu_memory_utilization" in e)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    return record("healthy", root / "rec", duration=120, seed=3, start_unix=START)


@pytest.fixture(scope="module")
def store_config(recording: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store holding the recording as every documented target, and a config naming it."""
    root = tmp_path_factory.mktemp("store")
    db = root / "pw.db"
    store = Store(db)
    first = last = 0.0
    names = sorted({_target(e) for e in examples() if "--target" in e})
    for name in names:
        _, first, last = record_into(store, recording, name)
    store.close()
    targets = [{"name": n, "url": "http://127.0.0.1:9/metrics"} for n in names]
    cfg = root / "pw.yaml"
    cfg.write_text(yaml.safe_dump({"targets": targets, "storage": {"path": str(db)}}))
    return {"config": str(cfg), "first": first, "last": last}


def _target(line: str) -> str:
    args = shlex.split(line)
    return args[args.index("--target") + 1]


def _as_run(line: str, recording: Path, store: dict[str, Any]) -> list[str]:
    """The example's arguments with its placeholders bound to the test's sources."""
    args = shlex.split(line)[1:]
    out: list[str] = []
    for i, a in enumerate(args):
        prev = args[i - 1] if i else ""
        if a.startswith("recordings/"):
            a = str(recording)
        elif prev == "--config":
            a = store["config"]
        elif prev == "--start" and a.startswith("now"):
            a = str(store["first"])
        elif prev == "--end" and a.startswith("now"):
            a = str(store["last"])
        out.append(a)
    return [*out, "--seeds", "1", "--quiet"]


@pytest.mark.parametrize("line", examples())
def test_every_documented_example_runs(
    line: str,
    recording: Path,
    store_config: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    watched: list[tuple[str, float]] = []

    async def observe(url: str, *, duration: float, interval: float) -> ReplayedScrapes:
        watched.append((url, duration))
        return read_scrapes(recording)

    monkeypatch.setattr(cli_whatif, "observe", observe)
    args = _as_run(line, recording, store_config)
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, (line, err)
    if "http" in line:
        assert watched and watched[0][1] == float(args[args.index("--duration") + 1])
    if "--json" in args:
        body = json.loads(out)
        assert body["predicted"]["ttft_p99"] is not None
    else:
        assert "TTFT p99" in out
    if "gpu_memory_utilization" in line:
        assert "gpu_memory_utilization=0.8: a pool of" in out
    if "--headroom" in args:
        assert "headroom:" in out


def test_gpu_memory_utilization_needs_the_weights_not_the_roofline(
    recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--server device=…`` gives the memory, ``--params`` the weights: no ``--gpu``."""
    base = ["whatif", str(recording), "--set", "gpu_memory_utilization=0.95", "--seeds", "1"]
    assert main([*base, "--server", "device=L40S-48GB", "--quiet"]) == 2
    assert "weights' size" in capsys.readouterr().err
    assert main([*base, "--server", "device=L40S-48GB", "--weight-bytes", "16e9", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    note = [w for w in out["warnings"] if w.startswith("gpu_memory_utilization=0.95")]
    assert note and "a pool of" in note[0]
    # The memory from a --gpu preset where no device is configured.
    assert main([*base, "--gpu", "l40s", "--params", "8e9", "--quiet"]) == 0
