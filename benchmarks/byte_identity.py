"""Byte identity of a refactor: every command's outputs hashed, to compare two trees.

Runs a fixed breadth of geoanalyze commands (marginals, distances, mds, stress with encodings and
MiniLM ``--layers all``, report, train, track, four ``verify --preset smoke``, the lists) in a
fresh folder beside ../shared, keeps each command's stdout and exit code, and writes
OUTDIR/manifest.txt: one line per output file with its sha256 (wall-clock fields, the run folder's
path and staging pids normalised). Snapshot the old tree and the new one, then diff the manifests:

    PYTHONPATH=OLD_TREE python benchmarks/byte_identity.py /tmp/old
    python benchmarks/byte_identity.py /tmp/new
    diff /tmp/old/manifest.txt /tmp/new/manifest.txt       # empty: byte-identical

``python benchmarks/byte_identity.py OUTDIR --rehash`` re-hashes a snapshot already taken; command
indices after OUTDIR run a subset.
"""

import contextlib
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

out = pathlib.Path(sys.argv[1]).resolve()
only = sys.argv[2:]  # optional subset of command indices
REHASH = "--rehash" in only
work = pathlib.Path("/tmp") / ("snp_" + hashlib.md5(str(out).encode()).hexdigest()[:8])
run = work / "run"
if not REHASH:
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    out.mkdir(parents=True)
    run.mkdir(parents=True)
    os.symlink(SHARED, work / "shared")
    shutil.copytree(REPO / "sample_corpora", run / "sample_corpora")
D = "--data-dir ../shared/data"
M = "sentence-transformers/all-MiniLM-L6-v2"
CMDS = [
    "marginals --dataset sample_corpora/drift.txt -t whitespace -o drift.counts.safetensors",
    "marginals --dataset sample_corpora/drift.txt -t whitespace -f json",
    f"marginals --dataset sst2 --split validation {D} -f markdown",
    "distances --dataset drift.counts.safetensors -o drift.dist.safetensors --plot-dir drift",
    f"distances --dataset sst2 --split validation {D} -f json",
    "distances --dataset sample_corpora/drift.txt -t whitespace -f markdown",
    "mds --dataset drift.counts.safetensors --estimate corrected --rank 2 --width 384 -o drift.pe2.safetensors --plot-dir mdsfig",
    f"mds --dataset sst2 --split validation {D} --rank 8 --width 384 -f json",
    "stress rope:d=64,base=10000 --dataset sample_corpora/drift-words.txt",
    "stress rope:d=64,base=10000 --dataset sample_corpora/drift-words.txt -f json",
    "stress sinusoidal:d=384 --dataset sample_corpora/drift-words.txt -f markdown --compare alibi,random:d=384,mds:rank=2 --plot-dir sinfig",
    f"stress {M} --dataset sst2 --split validation {D} --layers all -f json -o minilm.json --plot-dir minilm-figs",
    f"stress {M} --dataset sst2 --split validation {D} --layers all",
    f"report {M} rope:d=64 --dataset sst2 --split validation {D} -o ci/report.md --fail-above violation=0.45",
    "train --output-dir run --pe learned --set model.n_positions=16 --set order_length=12 --set steps=12 --set eval_every=3 --geometry-every 4 --keep-checkpoints 3",
    "track run --dataset sample_corpora/drift.txt --max-length 12",
    "track run --dataset sample_corpora/drift.txt --max-length 12 -f json -o track.json --plot-dir trackfig",
    "verify necessity --preset smoke --output-dir v/necessity " + D,
    "verify monotonicity --preset smoke --output-dir v/monotonicity",
    "verify edelta --preset smoke --output-dir v/edelta",
    "verify separation --preset smoke --output-dir v/separation " + D,
    "encodings list",
    "datasets list " + D,
]
TIMING = {
    "seconds",
    "wall_seconds",
    "elapsed",
    "elapsed_seconds",
    "wall",
    "time_s",
    "duration",
    "runtime_seconds",
    "cpu_seconds",
    "started",
    "finished",
    "timestamp",
    "date",
}


def norm(o):
    if isinstance(o, dict):
        return {k: norm(v) for k, v in o.items() if k not in TIMING and not k.endswith("_seconds")}
    if isinstance(o, list):
        return [norm(v) for v in o]
    return o


env = dict(
    os.environ,
    COLUMNS="80",
    NO_COLOR="1",
    TERM="dumb",
    GEOANALYZE_CACHE_DIR=str(work / "cache"),
    HF_DATASETS_CACHE=str(work / "hfcache"),
)
for i, c in enumerate(CMDS):
    if REHASH:
        break
    if only and str(i) not in only:
        continue
    p = subprocess.run(
        [sys.executable, "-m", "geoanalyze", *c.split()], cwd=run, env=env, capture_output=True, text=True
    )
    (out / f"cmd{i:02d}.stdout").write_text(f"$ geoanalyze {c}\nexit {p.returncode}\n" + p.stdout)
    if p.returncode not in (0, 1):
        (out / f"cmd{i:02d}.stderr").write_text(p.stderr[-3000:])
    print(i, p.returncode, c[:70], flush=True)
if not REHASH:
    shutil.copytree(run, out / "run", symlinks=True)
lines = []
for f in sorted(out.rglob("*")):
    if (
        f.is_dir()
        or f.is_symlink()
        or "sample_corpora" in f.parts
        or "cache" in f.parts
        or "hfcache" in f.parts
        or f.name.endswith(".stderr")
        or f.name == "manifest.txt"
    ):
        continue
    data = f.read_bytes().replace(str(work).encode(), b"<OUT>")
    data = re.sub(rb"\.\d+\.partial", b".<PID>.partial", data)
    if f.suffix in (".stdout", ".md", ".jsonl", ".txt"):
        data = re.sub(rb"\d+\.\d+ ?s\b", b"<T> s", data)
        data = re.sub(rb"(time_s\W+)[\d.]+", rb"\1<T>", data)
        data = re.sub(rb'("seconds": )[\d.]+', rb"\1<T>", data)
        data = re.sub(rb"(smoke|ci|paper), \d+ s\)", rb"\1, <T> s)", data)
        data = re.sub(rb"(smoke|ci|paper)`, \d+ s\.", rb"\1`, <T> s.", data)
        data = re.sub(rb'(_s": )[\d.]+', rb"\1<T>", data)
    if f.suffix == ".json":
        with contextlib.suppress(ValueError):  # not JSON after all: hashed as it is
            data = json.dumps(norm(json.loads(data)), sort_keys=True).encode()
    lines.append(f"{hashlib.sha256(data).hexdigest()[:16]}  {f.relative_to(out)}")
(out / "manifest.txt").write_text("\n".join(lines) + "\n")
print(len(lines), "files")
