#!/usr/bin/env bash
# One GPU, inside one 10-minute run: a random-weight Llama-architecture model of a real size (Llama-3.2-1B's
# shape: hidden 2048, 16 layers, 32 heads, 8 KV heads; YaRN x16 over 8192 positions) in bf16, at 32k, 64k and
# 128k tokens. Our capture pass (every layer's hidden-state centroids and every block's rotated query/key
# centroids, chunked prefill through the model's DynamicCache, SDPA attention) against a plain transformers
# forward of the same model, a subprocess each: tokens/s and peak GPU memory, as ratios against the goal 1.2x.
#   bash benchmarks/gpu/long_context.sh                  (from the repository root, venv at .venv)
#   LENGTHS=32768,65536 bash benchmarks/gpu/long_context.sh       (fewer lengths)
#   bash benchmarks/gpu/long_context.sh --tiny            (a dry run of the Python part on CPU: tiny model, 2,048 tokens)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
if [ "${1:-}" = "--tiny" ] || [ "${1:-}" = "--dry-run" ]; then
    exec "$PY" benchmarks/bench_long_checkpoint.py --tiny
fi
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null || {
    echo "error: no CUDA GPU visible to $PY (torch.cuda.is_available() is False); this benchmark needs one" >&2
    exit 2
}
export GEOANALYZE_CACHE_DIR=$(mktemp -d)
trap 'rm -rf "$GEOANALYZE_CACHE_DIR"' EXIT
start=$(date +%s)
timeout 570 "$PY" benchmarks/bench_long_checkpoint.py --size 1b --device cuda --dtype bfloat16 \
    --lengths "${LENGTHS:-32768,65536,131072}"
echo "total $(( $(date +%s) - start )) s"
