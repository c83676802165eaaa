"""Writing an MDS positional encoding into a copy of a Hugging Face BERT checkpoint."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..errors import IncompatibleError, InputError
from ..geometry.mds import LowRankEncoding


def _check_positions_match(encoding: LowRankEncoding, checkpoint: Path) -> None:
    """The encoding's position i must be the model's position i: same tokens, [CLS] at 0."""
    counts = encoding.metadata.get("counts") or {}
    if counts.get("add_special_tokens") is False:
        raise IncompatibleError(
            "the encoding was counted without special tokens (its position 0 is the first word, the model's "
            "is [CLS]); recount without --no-special-tokens"
        )
    identity = counts.get("tokenizer") or {}
    if identity.get("kind") in ("whitespace", "char"):
        raise IncompatibleError(
            f"the encoding's positions come from the {identity['kind']} tokenizer, not the model's; "
            "recount with --tokenizer pointing at the checkpoint"
        )
    if identity.get("vocab_sha256") and any(checkpoint.glob("tokenizer*")):
        from ..corpus.tokenize import HFTokenizer

        theirs = HFTokenizer(str(checkpoint)).identity().get("vocab_sha256")
        if theirs != identity["vocab_sha256"]:
            raise IncompatibleError(
                f"the encoding was counted with {identity.get('name')}, whose vocabulary differs from the "
                "checkpoint's; recount with --tokenizer pointing at the checkpoint"
            )


def write_into_checkpoint(
    encoding: LowRankEncoding, checkpoint: str | os.PathLike[str], output: str | os.PathLike[str]
) -> dict[str, Any]:
    """Copy a HF BERT checkpoint folder to ``output`` with its position embeddings replaced.

    Row ``positions[k]`` of ``embeddings.position_embeddings.weight`` becomes P[k]; rows the
    encoding does not cover keep the checkpoint's values (reported). The copy is made in a
    temporary folder and renamed into place, so a failure leaves nothing behind.
    """
    source = Path(checkpoint).expanduser()
    target = Path(output).expanduser()
    weights = source / "model.safetensors"
    if not weights.is_file():
        raise InputError(f"{source} has no model.safetensors; pass a local HF BERT checkpoint folder")
    if target.exists():
        raise InputError(f"{target} already exists; pass a new folder for the modified checkpoint")
    import json

    try:
        config = json.loads((source / "config.json").read_text()) if (source / "config.json").is_file() else {}
    except (OSError, ValueError) as exc:
        raise InputError(f"{source}/config.json is unreadable ({exc}); pass an intact HF BERT checkpoint") from exc
    _check_positions_match(encoding, source)
    model_type = config.get("model_type")
    if model_type != "bert":
        raise IncompatibleError(
            f"writing into a {model_type or 'unknown'} checkpoint is not supported yet; pass a BERT checkpoint"
        )
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    keys = [k for k in tensors if k.endswith("embeddings.position_embeddings.weight")]
    if len(keys) != 1:
        raise IncompatibleError(f"{weights} has {len(keys)} position-embedding tables; expected exactly one")
    table = tensors[keys[0]]
    n_table, width = table.shape
    if width != encoding.dim:
        raise IncompatibleError(
            f"the encoding has width {encoding.dim} but the checkpoint's hidden size is {width}; rerun mds with --width {width}"
        )
    if encoding.positions.max(initial=-1) >= n_table:
        raise IncompatibleError(
            f"the encoding covers position {int(encoding.positions.max())} but the checkpoint has "
            f"{n_table} positions; lower --max-length"
        )
    import torch

    updated = table.clone()
    updated[torch.as_tensor(encoding.positions)] = torch.as_tensor(encoding.position_embeddings, dtype=table.dtype)
    tensors[keys[0]] = updated.contiguous()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    from ..io import UMASK

    os.chmod(staging, 0o777 & ~UMASK)  # mkdtemp makes 0700; the copy gets the mode mkdir would give
    try:
        shutil.copytree(source, staging, dirs_exist_ok=True)
        save_file(tensors, str(staging / "model.safetensors"), metadata={"format": "pt"})
        os.chmod(staging / "model.safetensors", 0o666 & ~UMASK)  # save_file makes 0600
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return {
        "checkpoint": str(target),
        "table": keys[0],
        "rows_replaced": int(encoding.positions.size),
        "rows_kept": int(n_table - encoding.positions.size),
    }
