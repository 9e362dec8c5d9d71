"""Pack one recorded A/B pair for the tests: ``pair.json`` and run 1 of A and of B.

    python tests/vllm_real/pack_pair.py OUTDIR/<pair> OUTDIR/<pair>.tar.gz [--limit-mb 1.5]

The archive holds ``<pair>/pair.json`` and ``<pair>/{A,B}/run1/`` (the pages, ``meta.json``,
``load.jsonl``), as record_pairs.sh wrote them; not the server logs nor runs 2..N.
When it would be ``--limit-mb`` or more, ``load.jsonl`` is trimmed: each request's
``gaps`` list (the client's seconds between content chunks) is replaced by
``gaps_n``, ``gap_mean`` and ``gap_max``, and the archive's ``pair.json`` says so
(``archive.load_jsonl``). Reproducible: names sorted, owner 0, every mtime A's ``start``.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

RUN = "run1"


def _trimmed(text: str) -> str:
    out = []
    for line in text.splitlines():
        rec: dict[str, Any] = json.loads(line)
        gaps = rec.pop("gaps", None)
        if gaps is not None:
            rec["gaps_n"] = len(gaps)
            rec["gap_mean"] = round(sum(gaps) / len(gaps), 5) if gaps else None
            rec["gap_max"] = max(gaps) if gaps else None
        out.append(json.dumps(rec, separators=(",", ":")))
    return "\n".join(out) + "\n"


def _files(pair_dir: Path, trim: bool) -> list[tuple[str, bytes]]:
    name = pair_dir.name
    pair = json.loads((pair_dir / "pair.json").read_text())
    if trim:
        pair["archive"] = {
            "load_jsonl": "trimmed: each request's gaps list replaced by gaps_n, gap_mean, gap_max"
        }
    files = [(f"{name}/pair.json", (json.dumps(pair, indent=2) + "\n").encode())]
    for side in ("A", "B"):
        run = pair_dir / side / RUN
        for path in sorted(run.iterdir()):
            if path.name.startswith("."):
                continue
            data = path.read_bytes()
            if trim and path.name == "load.jsonl":
                data = _trimmed(data.decode()).encode()
            files.append((f"{name}/{side}/{RUN}/{path.name}", data))
    return files


def pack(pair_dir: Path, out: Path, limit_mb: float) -> tuple[int, bool]:
    """Write the archive; (its size in bytes, whether load.jsonl was trimmed)."""
    mtime = int(json.loads((pair_dir / "A" / RUN / "meta.json").read_text())["start"])
    for trim in (False, True):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
            dirs: set[str] = set()
            for arc, data in _files(pair_dir, trim):
                parts = arc.split("/")
                for i in range(1, len(parts)):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        info = tarfile.TarInfo(d)
                        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
                        tar.addfile(info)
                info = tarfile.TarInfo(arc)
                info.size, info.mode, info.mtime = len(data), 0o644, mtime
                tar.addfile(info, io.BytesIO(data))
        packed = gzip.compress(buf.getvalue(), compresslevel=9, mtime=0)
        if len(packed) < limit_mb * 1e6 or trim:
            out.write_bytes(packed)
            return len(packed), trim
    raise AssertionError("unreachable")


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("pair_dir", type=Path, help="OUTDIR/<pair> of record_pairs.sh")
    p.add_argument("out", type=Path, help="the .tar.gz to write")
    p.add_argument("--limit-mb", type=float, default=1.5, help="trim load.jsonl at this size")
    args = p.parse_args()
    size, trimmed = pack(args.pair_dir, args.out, args.limit_mb)
    note = ", load.jsonl trimmed" if trimmed else ""
    print(f"{args.out}: {size / 1e6:.2f} MB{note}")
    if size >= args.limit_mb * 1e6:
        print(f"{args.out}: still over {args.limit_mb} MB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
