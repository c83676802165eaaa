"""Parameter counts of the five EΔ-MHC-Geo benchmark models, ours and the reference code's, as a record.

    .venv/bin/python benchmarks/edelta_parameters.py docs/results/edelta-parameters.json

Instantiates each model at d_in = d_out = 16 (the gyroscope's width): ours (protocol causal, no
position table) and the reference code's (protocol reference, a 256-step position table), with
the reference models' counts also without that table. docs/edelta.md §3 reads its two tables from
this record; tests/unit/models/test_edelta_model.py pins the reference counts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def counts() -> dict[str, object]:
    from geoanalyze.models.edelta import MODEL_NAMES, EDeltaModel, count_parameters, preset_config

    ours, reference = {}, {}
    for name in MODEL_NAMES:
        config = preset_config(name, d_in=16)
        ours[name] = {
            "layers": config.n_layers,
            "n_embd": config.n_embd,
            "generator_width": config.hidden or config.n_embd // 4,
            "parameters": count_parameters(EDeltaModel(config)),
        }
        model = EDeltaModel(preset_config(name, reference=True, d_in=16, positions=256))
        table = model.pos.numel() if model.pos is not None else 0
        total = count_parameters(model)
        reference[name] = {
            "layers": model.config.n_layers,
            "n_embd": model.config.n_embd,
            "parameters": total,
            "without_position_table": total - table,
        }
    return {"d_in": 16, "positions": 256, "ours": ours, "reference": reference, "command": " ".join(sys.argv)}


def main() -> None:
    record = json.dumps(counts(), indent=2) + "\n"
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(record, encoding="utf-8")
    else:
        sys.stdout.write(record)


if __name__ == "__main__":
    main()
