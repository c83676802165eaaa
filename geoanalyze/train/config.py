"""The one configuration of a training run, its presets, and how overrides reach it.

A run is a :class:`TrainConfig`: the task, the model (a :class:`ModelConfig`), the optimiser
schedule, the data and the device. :func:`resolve_config` builds one in three layers, each
overriding the one before::

    preset ("ci" or "paper")  ->  TOML file  ->  --set key=value, in the order given

Keys are the field names; ``model.<field>`` reaches into the model (``model.pe=rope``). A
``--set`` value is a string converted to the field's type; a TOML value must already have it
(for a field that may be empty, the string "none" empties it in both).
"""

from __future__ import annotations

import math
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..errors import FormatError, InputError
from ..io import Record
from ..models.config import ModelConfig, check_choice, check_integer

TASKS = ("mlm", "classification", "order", "lm")
DEVICES = ("auto", "cpu", "cuda")

#: a setting's value, as a preset, a TOML file or --set gives it; a preset's ``model`` is a table of them
Setting = int | float | str | bool | None
Settings = dict[str, Setting | dict[str, Setting]]

#: the model of the ci preset (and of TrainConfig()): the order task in seconds, SST-2 in a minute or two on 2 CPU cores
CI_MODEL = ModelConfig(n_positions=128, d_model=64, n_layers=2, n_heads=4, d_ff=256, dropout=0.1)

#: nested overrides of the defaults; the defaults themselves are the ci preset
PRESETS: dict[str, Settings] = {
    # seconds on a CPU: a check that a run goes through end to end, not a trained model
    "smoke": {"steps": 20, "warmup_steps": 2, "eval_every": 10, "eval_batches": 1, "limit": 2000},
    "ci": {},
    "paper": {
        # BERT-base (Devlin et al. 2019): 12 layers, width 768, 12 heads, 3072 MLP, 512 positions.
        "model": {"n_positions": 512, "d_model": 768, "n_layers": 12, "n_heads": 12, "d_ff": 3072, "dropout": 0.1},
        "steps": 20000,
        "batch_size": 64,
        "lr": 1e-4,
        "warmup_steps": 1000,
        "weight_decay": 0.01,
        "eval_every": 1000,
        "eval_batches": 20,
        "max_length": 512,
        "limit": None,
        # A BERT-base run on a CPU would take days: ask for CUDA, so its absence is one clear error.
        "device": "cuda",
    },
}


#: the most tokens one optimiser step may hold (batch_size x sequence length): a sanity bound, far
#: above what one device trains on, that refuses a mistyped size before anything is allocated
MAX_STEP_TOKENS = 1 << 24
#: the most optimiser updates (and evaluation batches, warm-up and evaluation intervals) a run may ask
#: for: 500 times the paper preset's 20000, days of a GPU; ``steps = 2^70`` would start a run that
#: never ends. Seeds: what numpy and torch take, as on the command line.
MAX_STEPS = 10_000_000
MAX_SEED = 2**32 - 1


@dataclass
class TrainConfig(Record):
    """Everything a training run depends on; JSON-safe through :meth:`to_dict`.

    Attributes
    ----------
    task : "mlm" (masked tokens for bert, next token for gpt, on ``dataset``), "classification"
        (the ``label`` column of ``dataset``, SST-2 by default) or "order" (synthetic: which of
        two marker tokens comes first, see :mod:`geoanalyze.train.tasks`) or "lm" (next token on
        contiguous blocks of ``max_length`` tokens cut from the concatenated corpus; model.arch gpt).
    model : the model; its ``vocab_size`` and ``n_classes`` are set from the task when training.
    steps : optimiser updates in the whole run.
    batch_size : sequences per update.
    lr : peak learning rate, reached after ``warmup_steps``.
    warmup_steps : updates of linear warm-up from 0 to ``lr``.
    min_lr_ratio : the cosine decay ends at ``min_lr_ratio * lr`` on the last step.
    weight_decay : AdamW's decoupled decay, on matrices only (not on biases, LayerNorms,
        embeddings or position tables).
    grad_clip : clip the global gradient norm to this value; 0 disables clipping.
    eval_every : evaluate, log and checkpoint every this many steps (and after the last).
    eval_batches : batches of the held-out stream in each evaluation.
    seed : seeds the model's initialisation, every batch and every dropout mask.
    device : "auto" (cuda when available, else cpu), "cpu" or "cuda".
    dataset : mlm / classification corpus: a dataset name ("sst2"), a file or folder path, or a
        synthetic spec, as every geoanalyze command reads them.
    split : the split trained on (named datasets).
    eval_split : the held-out split; None, or a source without splits (a file, a synthetic
        spec), holds out the last 10% of the training texts instead.
    data_dir : local folder laid out ``<name>/<split>.<ext>`` standing in for the hub
        (default: $GEOANALYZE_DATA_DIR).
    tokenizer : "whitespace", "char", a Hugging Face name or a local tokenizer folder; None picks the
        pipeline's default for ``dataset`` (bert-base-uncased, whitespace for synthetic specs).
    max_length : mlm / classification: tokens per text at most, special tokens included.
    limit : read at most this many texts of each split; None reads them all.
    mask_prob : fraction of tokens the mlm task masks (of those: 80% [MASK], 10% random, 10% kept).
    order_length : tokens per sequence of the order task, [CLS] included.
    order_vocab : number of filler tokens of the order task.
    """

    task: str = "order"
    model: ModelConfig = field(default_factory=lambda: replace(CI_MODEL))
    steps: int = 200
    batch_size: int = 32
    lr: float = 1e-3
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_every: int = 50
    eval_batches: int = 4
    seed: int = 0
    device: str = "cpu"
    dataset: str = "sst2"
    split: str = "train"
    eval_split: str | None = "validation"
    data_dir: str | None = None
    tokenizer: str | None = None
    max_length: int = 64
    limit: int | None = 20000
    mask_prob: float = 0.15
    order_length: int = 16
    order_vocab: int = 16

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelConfig):
            raise InputError(f"model must be a ModelConfig, got {type(self.model).__name__}")
        check_choice("task", self.task, TASKS)
        check_choice("device", self.device, DEVICES)
        for name, minimum in (("steps", 1), ("batch_size", 1), ("eval_every", 1), ("eval_batches", 1)):
            check_integer(name, getattr(self, name), minimum)
        for name in ("warmup_steps", "seed"):
            check_integer(name, getattr(self, name), 0)
        for name in ("steps", "warmup_steps", "eval_every", "eval_batches"):
            _at_most(name, getattr(self, name), MAX_STEPS, "a run of that size would never end")
        _at_most("seed", self.seed, MAX_SEED, "seeds are what numpy and torch take")
        check_integer("max_length", self.max_length, 4)
        check_integer("order_length", self.order_length, 3)
        check_integer("order_vocab", self.order_vocab, 2)
        if self.limit is not None:
            check_integer("limit", self.limit, 1)
        length = self.order_length if self.task == "order" else self.max_length
        if self.batch_size * length > MAX_STEP_TOKENS:
            # refused before any batch is built: a step this large would fill the memory, not fail cleanly
            raise InputError(
                f"batch_size {self.batch_size} x {'order_length' if self.task == 'order' else 'max_length'} {length} "
                f"is {self.batch_size * length:,} tokens a step, above the {MAX_STEP_TOKENS:,} one step may hold; "
                "lower batch_size"
            )
        if not self.lr > 0:
            raise InputError(f"lr must be positive, got {self.lr}")
        for name in ("min_lr_ratio", "mask_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InputError(f"{name} must be within [0, 1], got {getattr(self, name)}")
        for name in ("weight_decay", "grad_clip"):
            if not getattr(self, name) >= 0:
                raise InputError(f"{name} must be at least 0, got {getattr(self, name)}")


def resolve_config(
    preset: str | None = "ci",
    overrides: typing.Sequence[str] = (),
    toml_path: str | Path | None = None,
) -> TrainConfig:
    """Build a :class:`TrainConfig` from a preset, a TOML file and ``key=value`` overrides.

    Parameters
    ----------
    preset : a name in :data:`PRESETS`, or None for the defaults (= "ci").
    overrides : ``"key=value"`` strings applied last, in order; ``model.<field>`` sets a model field.
    toml_path : a TOML file of the same keys (top-level keys, a ``[model]`` table).

    Raises
    ------
    InputError : an unknown preset or key, a value of the wrong type, or an invalid combination.
    """
    if preset is not None and preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    values = _flat_defaults()
    if preset is not None:
        for key, value in _flatten(PRESETS[preset], f"preset {preset}").items():
            values[key] = _typed(key, value, f"preset {preset}")
    if toml_path is not None:
        for key, value in _flatten(_read_toml(Path(toml_path)), str(toml_path)).items():
            values[key] = _typed(key, value, str(toml_path))
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"--set {item!r} is not key=value; write e.g. --set steps=100 or --set model.pe=rope")
        values[key] = _typed(key, raw.strip(), "--set")
    # every value has its field's type (_typed checked it), which mypy cannot see through **
    model = ModelConfig(**{key[len("model.") :]: v for key, v in values.items() if key.startswith("model.")})  # type: ignore[arg-type]
    return TrainConfig(model=model, **{key: v for key, v in values.items() if not key.startswith("model.")})  # type: ignore[arg-type]


def valid_keys() -> list[str]:
    """Every key :func:`resolve_config` accepts: the TrainConfig fields and ``model.<field>``."""
    return list(_field_types())


# --- the machinery ----------------------------------------------------------------------------


def _field_types() -> dict[str, object]:
    """Key -> annotated type, for TrainConfig's fields (but model) and ModelConfig's as model.<name>."""
    hints = typing.get_type_hints(TrainConfig)
    types_ = {f.name: hints[f.name] for f in fields(TrainConfig) if f.name != "model"}
    model_hints = typing.get_type_hints(ModelConfig)
    types_.update({f"model.{f.name}": model_hints[f.name] for f in fields(ModelConfig)})
    return types_


def _flat_defaults() -> dict[str, Setting]:
    defaults = TrainConfig()
    values = {f.name: getattr(defaults, f.name) for f in fields(TrainConfig) if f.name != "model"}
    values.update({f"model.{name}": value for name, value in defaults.model.to_dict().items()})
    return values


def _flatten(document: Mapping[str, object], source: str, prefix: str = "") -> dict[str, object]:
    """Nested tables -> dotted keys; only ``model`` may be a table."""
    flat: dict[str, object] = {}
    for key, value in document.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            if dotted != "model":
                raise InputError(f"{source}: {dotted!r} is not a table; only [model] is ({_keys_hint()})")
            flat.update(_flatten(value, source, prefix="model."))
        else:
            flat[dotted] = value
    return flat


def _read_toml(path: Path) -> dict[str, Any]:
    if path.expanduser().exists() and not path.expanduser().is_file() and not path.expanduser().is_dir():
        # /dev/zero, a FIFO: reading would never end (or fill the memory)
        raise InputError(f"config file {path} is not a regular file; pass a TOML file")
    try:
        text = path.expanduser().read_text(encoding="utf-8-sig")  # a BOM (Windows editors) is not TOML
    except FileNotFoundError as exc:
        raise InputError(f"config file not found: {path}; check the path") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read config file {path} ({exc}); pass a UTF-8 TOML file") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{path} is not valid TOML ({exc}); fix the file") from exc
    except RecursionError as exc:  # arrays nested thousands deep: no setting is
        raise FormatError(f"{path} nests arrays or tables too deep to read; fix the file") from exc


def _keys_hint() -> str:
    return "valid keys: " + ", ".join(_field_types())


def _typed(key: str, value: object, source: str) -> Setting:
    """``value`` as the type of field ``key``: parsed when a string from --set, checked otherwise."""
    annotation = _field_types().get(key)
    if annotation is None:
        raise InputError(f"{source}: unknown setting {key!r}; {_keys_hint()}")
    allowed = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    optional = type(None) in allowed
    kind = next(t for t in allowed if t is not type(None))
    if optional and (value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null"))):
        return None
    from_string = isinstance(value, str) and source == "--set"
    try:
        return _convert(value, kind, from_string)
    except ValueError:
        expected = _TYPE_NAMES[kind] + (" or none" if optional else "")
        raise InputError(f"{source}: {key} must be {expected}, got {value!r}") from None


_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _convert(value: Any, kind: type, from_string: bool) -> Any:
    """Convert (from a --set string) or check (a typed TOML / preset value); ValueError when impossible."""
    if kind is bool:
        if from_string and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.strip().lower() in ("true", "1", "yes")
        if isinstance(value, bool):
            return value
    elif kind is int:
        if from_string:
            return int(value.strip().replace("_", ""))
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif kind is float:
        number = float(value) if from_string else value
        if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number):
            return float(number)
    elif kind is str and isinstance(value, str):
        return value
    raise ValueError(value)


def _at_most(name: str, value: int, maximum: int, why: str) -> None:
    if value > maximum:
        raise InputError(f"{name} must be at most {maximum:,} ({why}), got {value:,}; lower {name}")
