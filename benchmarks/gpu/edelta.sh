#!/usr/bin/env bash
# EΔ-MHC-Geo at the paper's scale on one GPU: `geoanalyze verify edelta-benchmarks --preset paper`
# (2000 steps, seeds 42, 123, 456, full data sizes, n_embd 128), in up to three parts, each its own
# verified result under $OUT/<part>/ (edelta-benchmarks.json, .md, figures):
#
#   reference  the reference protocol's table (4 sequence tasks x 5 models, norm deviation, negation)
#   sweeps     EΔ's init-robustness (near-pi, gate bias 1.5 / 0 / -1.5 at weight 0.5) and L_gate weight
#              ablation (gyroscope, 0 / 0.05 / 0.1 / 0.2), reference protocol
#   causal     our per-token (causal) design's table
#
# The models are small (1.8M parameters), so a step is launch-bound (thousands of small kernels): the
# runs are independent and go to $WORKERS processes sharing the GPU. Estimated with
# `benchmarks/bench_edelta.py --gpu-estimate` (launches per step counted by the profiler; 6 us a
# launch, 2 us a kernel, 16 workers): one seed, reference part ~7 min; sweeps ~3 min; causal ~7 min.
# The paper's three seeds take three times as long (SEEDS=42,123,456: reference ~21 min). The default
# (reference part, seed 42) is the one sized to finish within 8 minutes. Not yet run on a GPU.
#
# Usage: bash benchmarks/gpu/edelta.sh                      # the reference part, seed 42
#        PARTS="reference sweeps causal" SEEDS=42,123,456 bash benchmarks/gpu/edelta.sh
# Environment: PYTHON (.venv/bin/python), PRESET (paper), DEVICE (cuda), WORKERS (16), OUT (gpu-edelta),
#              PARTS (reference), SEEDS (42), GATE (plain; entropy: the reference code's gate).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
PRESET=${PRESET:-paper}
DEVICE=${DEVICE:-cuda}
WORKERS=${WORKERS:-16}
OUT=${OUT:-gpu-edelta}
PARTS=${PARTS:-reference}
GATE=${GATE:-plain}
SEEDS=${SEEDS:-42}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
status=0
for part in $PARTS; do
  case "$part" in
    reference) sets=(--set protocol=reference --set sweeps=) ;;
    sweeps) sets=(--set protocol=reference --set tasks= --set sweeps=init-robustness,gate-weight) ;;
    causal) sets=(--set protocol=causal --set sweeps=) ;;
    *) echo "error: unknown part $part; choose among reference, sweeps, causal" >&2; exit 2 ;;
  esac
  began=$(date +%s)
  # exit 1 is a failed verdict (a result); anything else stops the script
  "$PYTHON" -m geoanalyze verify edelta-benchmarks --preset "$PRESET" --device "$DEVICE" --seed 42 \
    "${sets[@]}" --set gate="$GATE" --set seeds="$SEEDS" --set workers="$WORKERS" -o "$OUT/$part" --force --format markdown \
    > "$OUT.$part.md" || { rc=$?; [ "$rc" -eq 1 ] || exit "$rc"; status=1; }
  echo "$part: $(( $(date +%s) - began )) s, verdicts in $OUT/$part/edelta-benchmarks.md"
done
exit "$status"
