#!/usr/bin/env bash
# JoFormer's language-model claims at (near) the paper's scale on one GPU, each part its own verified
# result under $OUT/<part>/ (<experiment>.json, .md, figures):
#
#   length     `verify length-generalization --preset paper`: RoPE, JoFormer-fixed, -learned and -projected
#              GPT LMs (8 layers, width 512, bert-base-uncased WordPiece) trained at L = 512 and scored at
#              512, 1024, 2048, 4096 (paper: ratios 6.29x, 4.41x, 1.02x at 4096). Only the WikiText-2
#              validation file is in the offline data, so it trains on its first 90% (split=validation,
#              eval_split=none) and scores the last 10%; STEPS_LENGTH steps (paper: 20,000).
#   vocab      `verify lm-vocab --preset paper`: byte-level BPE of 8k / 16k / 32k trained with `tokenizers` on
#              IMDB train, RoFormer vs JoFormer-learned vs -projected (6 layers, width 512, block 64) trained
#              on IMDB train, scored on WikiText-2 validation (paper, Wikipedia: 4.32 vs 4.67, 26.30 vs 27.30,
#              69.12 vs 69.76); STEPS_VOCAB steps per model.
#   reference  `verify joformer-reference --preset paper`: the published scripts' models (softplus, one
#              head, token angles by suffix sum) beside ours, the scripts' recipe (10,000 steps).
#
# Estimated on one H100/H200 (bf16 autocast; not yet run on a GPU: this project's sessions had none):
# length ~4 min at 1,000 steps, vocab ~3.5 min at 1,000 steps (the three tokenizers train on the CPU,
# ~1 min of it); the default PARTS="length vocab" is sized to finish within 8 minutes. reference adds
# ~4 min (eight small launch-bound models).
#
# Usage: bash benchmarks/gpu/joformer.sh
#        PARTS="length" STEPS_LENGTH=20000 bash benchmarks/gpu/joformer.sh     # the paper's step count
# Environment: PYTHON (.venv/bin/python), DEVICE (cuda), OUT (gpu-joformer), PARTS (length vocab),
#              DATA_DIR (../shared/data: sst2/, imdb/, wikitext2/ as in the offline data README),
#              STEPS_LENGTH (1000), STEPS_VOCAB (1000).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
DEVICE=${DEVICE:-cuda}
OUT=${OUT:-gpu-joformer}
PARTS=${PARTS:-length vocab}
DATA_DIR=${DATA_DIR:-../shared/data}
STEPS_LENGTH=${STEPS_LENGTH:-1000}
STEPS_VOCAB=${STEPS_VOCAB:-1000}
export OMP_NUM_THREADS=4 MKL_NUM_THREADS=4 HF_HUB_OFFLINE=1

if [ ! -f "$DATA_DIR/wikitext2/validation.tokens" ]; then
  echo "error: $DATA_DIR/wikitext2/validation.tokens not found; set DATA_DIR to the offline data folder" >&2
  exit 2
fi
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
mkdir -p "$OUT"
status=0
for part in $PARTS; do
  case "$part" in
    length)
      experiment=length-generalization
      sets=(--set split=validation --set eval_split=none --set "steps=$STEPS_LENGTH" --set "eval_every=$STEPS_LENGTH"
            --set warmup_steps=100) ;;
    vocab)
      experiment=lm-vocab
      sets=(--set "steps=$STEPS_VOCAB" --set "eval_every=$STEPS_VOCAB" --set warmup_steps=100) ;;
    reference)
      experiment=joformer-reference
      sets=() ;;
    *) echo "error: unknown part $part; choose among length, vocab, reference" >&2; exit 2 ;;
  esac
  began=$(date +%s)
  # exit 1 is a failed verdict (a result); anything else stops the script
  "$PYTHON" -m geoanalyze verify "$experiment" --preset paper --device "$DEVICE" --data-dir "$DATA_DIR" \
    ${sets[@]+"${sets[@]}"} -o "$OUT/$part" --force --format markdown > "$OUT/$part.md" \
    || { rc=$?; [ "$rc" -eq 1 ] || exit "$rc"; status=1; }
  echo "$part: $(( $(date +%s) - began )) s, verdicts in $OUT/$part/$experiment.md"
done
exit "$status"
