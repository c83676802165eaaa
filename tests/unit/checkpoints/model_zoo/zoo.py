"""A zoo of tiny random-weight checkpoints, built offline from transformers' config classes.

Each entry names a model type, the config values that make it tiny (width 32, 2 blocks,
4 heads, a 400-word vocabulary) and what its positions are *by its config*: the
mechanism and its parameters as a reader of the model card would state them. The tests
compare what geoanalyze detects with these statements, so the expectations here are written
from the configs, never from geoanalyze's output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WIDTH, BLOCKS, HEADS = 32, 2, 4
HEAD_DIM = WIDTH // HEADS
SPECIAL = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
COMMON = {
    "hidden_size": WIDTH,
    "num_hidden_layers": BLOCKS,
    "num_attention_heads": HEADS,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    **SPECIAL,
}
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}


#: a tiny Jamba: attention in its second layer only, beside Mamba layers and experts
JAMBA = {
    "num_key_value_heads": 2,
    "num_experts": 2,
    "attn_layer_period": 2,
    "attn_layer_offset": 1,
    "expert_layer_period": 2,
    "mamba_d_state": 4,
    "mamba_dt_rank": 4,
}


@dataclass(frozen=True)
class Entry:
    """One architecture of the zoo.

    kind : learned | fixed | rope | alibi | relative | none, by the config.
    family : encoder, decoder, encoder-decoder, moe, hybrid, ssm (for the docs table).
    offset : row of position 0 in a table.
    positions : positions the table holds (RoBERTa's table of 64 rows keeps row 0 for padding: 63).
    rope_dims, rope_base : the rotary width and base of the position row (base None: scaled).
    nope : blocks (1-based) whose attention skips RoPE.
    rope_sets : number of distinct RoPE sets (per layer type).
    heads : ALiBi heads.
    captured : whether query/key rows are expected.
    relative : a relative scheme is expected beside the kind.
    """

    name: str
    model_type: str
    family: str
    kind: str
    config: dict[str, Any] = field(default_factory=dict)
    offset: int = 0
    rope_dims: int = 0
    rope_base: float | None = None
    nope: tuple[int, ...] = ()
    rope_sets: int = 1
    heads: int = 0
    captured: bool = True
    relative: bool = False
    positions: int = 64
    generic: bool = False  # config: the type's own defaults shrunk by tiny_values(), then ``config`` on top
    model_class: str = ""  # the transformers class saved (default: AutoModel's), e.g. T5EncoderModel
    part: str = ""  # "encoder": only the encoder of an encoder-decoder is saved
    note: str = ""  # what a reader of the docs table should know


def _rope(name: str, model_type: str, family: str = "decoder", **kw: Any) -> Entry:
    dims = kw.pop("rope_dims", HEAD_DIM)
    base = kw.pop("rope_base", 10000.0)
    if "rotary_emb_base" not in kw:  # the configs' own defaults differ (Llama 4: 500000); state it
        kw.setdefault("rope_theta", base or 10000.0)
    extra = {k: kw.pop(k) for k in ("nope", "rope_sets", "captured") if k in kw}
    return Entry(name, model_type, family, "rope", kw, rope_dims=dims, rope_base=base, **extra)


ZOO: list[Entry] = [
    # --- encoders with a learned table
    Entry("BERT", "bert", "encoder", "learned"),
    Entry("RoBERTa", "roberta", "encoder", "learned", offset=1, positions=63),  # pad 0 -> positions from 1
    Entry("XLM-R", "xlm-roberta", "encoder", "learned", offset=1, positions=63),
    Entry("CamemBERT", "camembert", "encoder", "learned", offset=1, positions=63),
    Entry(
        "DistilBERT",
        "distilbert",
        "encoder",
        "learned",
        {"dim": WIDTH, "n_layers": BLOCKS, "n_heads": HEADS, "hidden_dim": 64},
    ),
    Entry("ELECTRA", "electra", "encoder", "learned", {"embedding_size": 16}),
    Entry("ALBERT", "albert", "encoder", "learned", {"embedding_size": 16}),
    Entry("ERNIE", "ernie", "encoder", "learned"),
    Entry("Megatron-BERT", "megatron-bert", "encoder", "learned"),
    Entry("MPNet", "mpnet", "encoder", "learned", offset=2, relative=True, positions=62),  # padding index fixed at 1
    Entry("DeBERTa", "deberta", "encoder", "learned", {"relative_attention": True}, relative=True),
    Entry(
        "DeBERTa-v2",
        "deberta-v2",
        "encoder",
        "relative",
        {"relative_attention": True, "position_biased_input": False},
        relative=True,
    ),
    _rope(
        "ModernBERT",
        "modernbert",
        "encoder",
        global_attn_every_n_layers=2,
        local_attention=16,
        rope_base=160000.0,
        rope_sets=2,
        cls_token_id=1,
        sep_token_id=2,
    ),
    _rope("RoFormer", "roformer", "encoder", embedding_size=WIDTH),
    # --- decoders with a learned or fixed table
    Entry(
        "GPT-2", "gpt2", "decoder", "learned", {"n_embd": WIDTH, "n_layer": BLOCKS, "n_head": HEADS, "n_positions": 64}
    ),
    Entry(
        "GPT-Neo",
        "gpt_neo",
        "decoder",
        "learned",
        {"attention_types": [[["global", "local"], 1]], "num_layers": BLOCKS, "window_size": 16},
    ),
    Entry(
        "GPTBigCode",
        "gpt_bigcode",
        "decoder",
        "learned",
        {"n_embd": WIDTH, "n_layer": BLOCKS, "n_head": HEADS, "n_positions": 64},
    ),
    Entry("OPT", "opt", "decoder", "learned", {"ffn_dim": 64, "word_embed_proj_dim": WIDTH}, offset=2),
    Entry("BioGPT", "biogpt", "decoder", "learned", offset=2),
    Entry(
        "XGLM",
        "xglm",
        "decoder",
        "fixed",
        {"d_model": WIDTH, "num_layers": BLOCKS, "attention_heads": HEADS, "ffn_dim": 64},
        offset=2,
    ),
    # --- RoPE decoders: full, partial, scaled, per layer type, NoPE layers
    _rope("Llama", "llama", num_key_value_heads=2),
    _rope("Llama (llama3 scaling)", "llama", num_key_value_heads=2, rope_scaling=LLAMA3, rope_base=None),
    _rope("Llama (linear scaling)", "llama", rope_scaling={"rope_type": "linear", "factor": 4.0}, rope_base=None),
    _rope("Llama (dynamic scaling)", "llama", rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
    _rope("Mistral", "mistral", num_key_value_heads=2, rope_theta=1000000.0, rope_base=1000000.0),
    _rope("Qwen2", "qwen2", num_key_value_heads=2),
    _rope(
        "Qwen2 (yarn scaling)",
        "qwen2",
        num_key_value_heads=2,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
        rope_base=None,
    ),
    _rope("Qwen3", "qwen3", num_key_value_heads=2, head_dim=16, rope_dims=16),
    _rope("Gemma", "gemma", num_key_value_heads=1, head_dim=8),
    _rope("Gemma2", "gemma2", num_key_value_heads=2, head_dim=8, sliding_window=16),
    _rope(
        "Gemma3",
        "gemma3_text",
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=16,
        layer_types=["sliding_attention", "full_attention"],
        rope_theta=1000000.0,
        rope_base=1000000.0,
        rope_sets=2,
    ),
    _rope("Phi (partial 0.5)", "phi", partial_rotary_factor=0.5, rope_dims=4),
    _rope("Phi-3", "phi3", num_key_value_heads=2),
    _rope("StableLM (partial 0.5)", "stablelm", num_key_value_heads=HEADS, partial_rotary_factor=0.5, rope_dims=4),
    _rope("GPT-NeoX (rotary_pct 0.5)", "gpt_neox", rotary_pct=0.5, rotary_emb_base=5000, rope_dims=4, rope_base=5000.0),
    _rope("GPT-J", "gptj", n_embd=WIDTH, n_layer=BLOCKS, n_head=HEADS, n_positions=64, rotary_dim=4, rope_dims=4),
    _rope(
        "CodeGen",
        "codegen",
        n_embd=WIDTH,
        n_layer=BLOCKS,
        n_head=HEADS,
        n_positions=64,
        n_ctx=64,
        rotary_dim=4,
        rope_dims=4,
    ),
    _rope("GLM-4 (partial 0.5)", "glm4", num_key_value_heads=2, head_dim=8, partial_rotary_factor=0.5, rope_dims=4),
    _rope("OLMo", "olmo"),
    _rope("OLMo-2", "olmo2"),
    _rope("OLMo-3", "olmo3", sliding_window=16, layer_types=["sliding_attention", "full_attention"], rope_sets=2),
    _rope("Granite", "granite"),
    _rope("Cohere", "cohere"),
    _rope("StarCoder2", "starcoder2", num_key_value_heads=2),
    _rope("SmolLM3 (NoPE every 2nd)", "smollm3", num_key_value_heads=2, no_rope_layer_interval=2, nope=(2,)),
    _rope(
        "Llama 4 (NoPE layer 1)",
        "llama4_text",
        "moe",
        num_key_value_heads=2,
        head_dim=8,
        intermediate_size_mlp=64,
        num_local_experts=2,
        no_rope_layers=[0, 1],
        nope=(1,),
    ),
    _rope("Falcon (RoPE)", "falcon", num_kv_heads=HEADS, new_decoder_architecture=True),
    # --- mixtures of experts
    _rope("Mixtral", "mixtral", "moe", num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
    _rope(
        "Qwen2-MoE",
        "qwen2_moe",
        "moe",
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=16,
    ),
    _rope("OLMoE", "olmoe", "moe", num_experts=4, num_experts_per_tok=2),
    _rope("GraniteMoE", "granitemoe", "moe", num_local_experts=4, num_experts_per_tok=2),
    # --- ALiBi
    Entry("BLOOM", "bloom", "decoder", "alibi", {"n_layer": BLOCKS, "n_head": HEADS}, heads=HEADS),
    Entry(
        "MPT",
        "mpt",
        "decoder",
        "alibi",
        {"d_model": WIDTH, "n_heads": HEADS, "n_layers": BLOCKS, "expansion_ratio": 2, "max_seq_len": 64},
        heads=HEADS,
    ),
    Entry(
        "Falcon (ALiBi)",
        "falcon",
        "decoder",
        "alibi",
        {"alibi": True, "num_kv_heads": HEADS, "new_decoder_architecture": True},
        heads=HEADS,
    ),
    # --- encoder-decoders (their encoder)
    Entry(
        "T5",
        "t5",
        "encoder-decoder",
        "relative",
        {
            "d_model": WIDTH,
            "d_kv": 8,
            "d_ff": 64,
            "num_layers": BLOCKS,
            "num_heads": HEADS,
            "decoder_start_token_id": 0,
        },
        relative=True,
    ),
    Entry(
        "BART",
        "bart",
        "encoder-decoder",
        "learned",
        {
            "d_model": WIDTH,
            "encoder_layers": BLOCKS,
            "decoder_layers": BLOCKS,
            "encoder_attention_heads": HEADS,
            "decoder_attention_heads": HEADS,
            "encoder_ffn_dim": 64,
            "decoder_ffn_dim": 64,
        },
        offset=2,
    ),
    # --- state-space models and hybrids
    Entry("Mamba", "mamba", "ssm", "none", {"state_size": 4, "expand": 2, "conv_kernel": 4}, captured=False),
    Entry(
        "Mamba-2",
        "mamba2",
        "ssm",
        "none",
        {"num_heads": 4, "head_dim": 16, "state_size": 4, "expand": 2, "n_groups": 1, "conv_kernel": 4},
        captured=False,
    ),
    Entry(
        "Jamba",
        "jamba",
        "hybrid",
        "none",
        JAMBA,
    ),
]


def build_config(entry: Entry, vocab_size: int) -> Any:
    from transformers import CONFIG_MAPPING, AutoConfig

    if not entry.generic:
        values = {**COMMON, "vocab_size": vocab_size, **entry.config}
        return AutoConfig.for_model(entry.model_type, **values)
    config_class = CONFIG_MAPPING[entry.model_type]
    values = tiny_values(config_class().to_dict(), vocab_size)
    for key in ("model_type", "transformers_version", "architectures"):
        values.pop(key, None)
    values.update(SPECIAL)
    values.update(entry.config)
    return config_class(**values)


def build_checkpoint(entry: Entry, folder: Path, tokenizer: Any, seed: int = 0) -> Path:
    """Save a random-weight model of ``entry`` and the zoo's tokenizer into ``folder``."""
    import warnings

    import torch
    from transformers import AutoModel

    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = build_config(entry, len(tokenizer))
        if entry.model_class:
            import transformers

            model = getattr(transformers, entry.model_class)(config)
        else:
            model = AutoModel.from_config(config)
        if entry.part == "encoder":
            model = model.get_encoder()
        model.eval().save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def corpus_tokenizer(corpus: Path) -> Any:
    """A byte-level BPE of 900 tokens trained on the corpus (its 400 words become whole tokens), with
    [PAD] 0, [BOS] 1, [EOS] 2: byte-level so that every family's own tokenizer class reads it alike."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=900,
        special_tokens=["[PAD]", "[BOS]", "[EOS]"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train([str(corpus)], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", bos_token="[BOS]", eos_token="[EOS]")


def describe(entry: Entry) -> str:
    """The mechanism with its parameters, as the docs table states it."""
    if entry.kind == "rope":
        parts = [f"{entry.rope_dims} of {entry.config.get('head_dim', HEAD_DIM)} dims"] if entry.rope_dims else []
        scaling = (entry.config.get("rope_scaling") or {}).get("rope_type")
        if scaling:
            parts.append(f"{scaling} scaling")
        elif entry.rope_base:
            parts.append(f"base {entry.rope_base:g}")
        if entry.rope_sets > 1:
            parts.append(f"{entry.rope_sets} sets by layer type")
        if entry.nope:
            parts.append(f"NoPE in block {', '.join(map(str, entry.nope))}")
        return "RoPE" + (" (" + ", ".join(parts) + ")" if parts else "")
    if entry.kind in ("learned", "fixed"):
        text = f"{entry.kind} table" + (f", offset {entry.offset}" if entry.offset else "")
        return text + (", + relative bias" if entry.relative else "")
    if entry.kind == "alibi":
        return f"ALiBi ({entry.heads} heads)"
    if entry.kind == "relative":
        return "relative only"
    return "none"


def verdict(entry: Entry) -> str:
    """full: every row the model can have is measured; partial: a row it has is left out with a note;
    awaiting capture / mechanism gap: a known gap the tests report (zoo.AWAITING_CAPTURE, MECHANISM_GAPS)."""
    if entry.name in MECHANISM_GAPS:
        return "mechanism gap"
    if entry.name in NOT_RUNNABLE_TINY:
        return "mechanism only (tiny config not runnable)"
    if entry.name in AWAITING_CAPTURE:
        return "awaiting capture"
    return "full" if entry.captured or entry.family == "ssm" else "partial (note)"


def markdown_table() -> str:
    """The zoo as docs/checkpoints.md shows it, with its counts (checked against the file by a test)."""
    entries = full_zoo()
    counts: dict[str, int] = {}
    for entry in entries:
        counts[verdict(entry)] = counts.get(verdict(entry), 0) + 1
    import transformers

    types = text_model_types()
    lines = [
        f"{len(types)} text model types in the auto mappings of transformers {transformers.__version__} (the "
        f"version CI pins); {len(entries)} zoo entries "
        f"of {len({e.model_type for e in entries})} types; {len(UNBUILDABLE)} types cannot be built at tiny width "
        f"and {len(NOT_TEXT_BASE)} takes no token ids (both lists in zoo.py, with reasons). By verdict: "
        + ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
        + ".",
        "",
        "| architecture | model_type | family | positions (by config) | position row | query/key rows | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in entries:
        position = "yes" if entry.kind in ("learned", "fixed", "rope", "alibi") else "no (note)"
        captured = "yes" if entry.captured else "no (note)"
        if entry.family == "ssm":
            captured = "none (no attention)"
        lines.append(
            f"| {entry.name} | `{entry.model_type}` | {entry.family} | {describe(entry)} | {position} | {captured} "
            f"| {verdict(entry)} |"
        )
    return "\n".join(lines)


# --- every text model type of the installed transformers ----------------------------------------------
#
# The hand-written entries above state their configs in full. Every other text model type is built from
# its config class's own defaults, shrunk by tiny_values() (width 32, 4 heads, one block of each distinct
# per-layer pattern, a 400-word vocabulary), with the few values a type needs on top (TINY_OVERRIDES).
# What its positions are is stated in TYPE_KINDS, read from its modeling code and config.

#: the auto mappings whose model types are text models (base, causal LM, masked LM, seq2seq, encoders)
TEXT_MAPPINGS = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES",
)
#: mappings of models that take images, audio or speech beside text: their text variants are listed apart
NOT_TEXT_MAPPINGS = (
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
)


def text_model_types() -> set[str]:
    """The text model types of the installed transformers' auto mappings (new releases add to it)."""
    from transformers.models.auto import modeling_auto

    def names(mappings: tuple[str, ...]) -> set[str]:
        return {model_type for mapping in mappings for model_type in getattr(modeling_auto, mapping)}

    return names(TEXT_MAPPINGS) - names(NOT_TEXT_MAPPINGS)


#: size fields and their tiny values (only fields the default config has are set)
TINY_SIZES = {
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "word_embed_proj_dim", "emb_dim"), WIDTH),
    **dict.fromkeys(
        ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads", "decoder_attention_heads"),
        HEADS,
    ),
    **dict.fromkeys(("num_key_value_heads", "num_kv_heads", "multi_query_group_num"), 2),
    **dict.fromkeys(
        (
            "intermediate_size",
            "ffn_dim",
            "d_ff",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "hidden_dim",
            "n_inner",
            "d_inner",
        ),
        64,
    ),
    **dict.fromkeys(("head_dim", "d_kv", "kv_channels", "d_head"), HEAD_DIM),
    **dict.fromkeys(
        (
            "max_position_embeddings",
            "n_positions",
            "n_ctx",
            "max_seq_len",
            "max_encoder_position_embeddings",
            "max_decoder_position_embeddings",
        ),
        64,
    ),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "num_experts_per_token", "moe_k"), 2),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size"), 16),
    "embedding_size": 16,
    "hidden_size_global": WIDTH,  # BLT's local encoder and decoder: the global transformer's width
    # experts, multi-head latent attention and its indexer, per-layer and extra vocabularies
    **dict.fromkeys(("expert_ffn_hidden_size", "index_head_dim", "qk_rope_head_dim", "qk_nope_head_dim"), 8),
    **dict.fromkeys(
        ("v_head_dim", "linear_head_dim", "hidden_size_per_layer_input", "global_head_dim", "rotary_dim"), 8
    ),
    **dict.fromkeys(("kv_lora_rank", "q_lora_rank", "qk_head_dim", "index_topk"), 16),
    **dict.fromkeys(("ffn_hidden_size", "embedding_dim"), 64),
    **dict.fromkeys(("index_n_heads", "zero_expert_num"), 2),
    **dict.fromkeys(("n_group", "topk_group", "num_expert_group", "topk_expert_group"), 1),  # expert groups of 4
    **dict.fromkeys(("entity_vocab_size", "shape_vocab_size", "pronunciation_vocab_size"), 100),
}
#: extra vocabularies sized like the vocabulary
TINY_VOCABULARIES = ("encoder_hash_byte_group_vocab", "src_vocab_size", "tgt_vocab_size", "vocab_size_per_layer_input")
LAYER_COUNTS = (
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_blocks",
)
_LABELS = ("id2label", "label2id")


def _layer_count(values: dict[str, Any]) -> int | None:
    for key in LAYER_COUNTS:
        value = values.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _indices(key: str, value: Any, layers: int) -> bool:
    """Whether a config value is a list of layer indices (full_attn_idxs, attn_layer_indices)."""
    return (
        isinstance(value, list)
        and bool(value)
        and ("layer" in key or "idx" in key)
        and all(type(x) is int and 0 <= x < layers for x in value)
        and len(set(value)) == len(value)
    )


def _kept_layers(values: dict[str, Any], layers: int) -> list[int]:
    """One layer of each distinct combination of the per-layer lists (sliding/full, NoPE, dense/MoE), at least 2."""
    import json

    lists = sorted(
        k for k, v in values.items() if isinstance(v, list) and len(v) == layers and not _indices(k, v, layers)
    )
    seen: set[str] = set()
    keep = []
    for index in range(layers):
        row = json.dumps([values[k][index] for k in lists], sort_keys=True, default=str)
        if row not in seen:
            seen.add(row)
            keep.append(index)
    keep += [index for index in range(layers) if index not in keep][: max(0, 2 - len(keep))]
    return sorted(keep)


def _cut_layers(values: dict[str, Any], layers: int, keep: list[int]) -> dict[str, Any]:
    """The per-layer lists, dicts keyed by layer and lists of layer indices, cut to the kept layers."""
    new = {old: index for index, old in enumerate(keep)}
    out: dict[str, Any] = {}
    for key, value in values.items():
        if _indices(key, value, layers):
            value = [new[x] for x in value if x in new]
        elif isinstance(value, list) and len(value) == layers:
            value = [value[index] for index in keep]
        elif isinstance(value, dict) and value and key not in _LABELS and all(str(k).isdigit() for k in value):
            value = {type(k)(new[int(k)]): v for k, v in value.items() if int(k) in new}
        out[key] = value
    for key in LAYER_COUNTS:
        if values.get(key) == layers:
            out[key] = len(keep)
    return out


def tiny_values(values: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """A config's values (``to_dict()``) at tiny width; nested sub-configs (encoder, decoder, text) alike."""
    layers = _layer_count(values)
    if layers and layers > 2:
        values = _cut_layers(values, layers, _kept_layers(values, layers))
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(value.get("model_type"), str):
            value = tiny_values(value, vocab_size)
        elif key in TINY_SIZES and type(value) in (int, float):  # musicflamingo's default positions: 1200.0
            value = TINY_SIZES[key]
        elif key == "intermediate_size" and isinstance(value, list):
            value = [64] * len(value)
        elif (key == "vocab_size" or key in TINY_VOCABULARIES) and type(value) is int:
            value = vocab_size
        out[key] = value
    return out


#: what each model type's positions are, read from its modeling code and config (the generic entries):
#: "kind[@offset]" then any of: "rel" (a relative scheme beside), "sets=N" (RoPE sets by layer type),
#: "nope=i,j" (attention blocks, 1-based, that skip RoPE), "dims=N" (rotary dims, where not
#: head_dim x partial_rotary_factor), "noqk" (no query/key rows: see TYPE_NOTES), "family=F".
#: RoPE dims and base are otherwise checked against the config (test_zoo.config_rope).
TYPE_KINDS = {
    "afmoe": "rope nope=2 family=moe",  # RoPE only where is_local_attention (sliding layers)
    "apertus": "rope",
    "apertus1p5_text": "rope",
    "arcee": "rope",
    "aria_text": "rope family=moe",
    "audioflamingo3": "rope",  # its blocks: language_model.layers (the audio tower's run on audio only)
    "axk1": "rope family=moe",
    "axk2": "rope family=moe",
    "bailing_hybrid": "rope family=hybrid",
    "bamba": "rope family=hybrid",
    "beam": "rope nope=3",  # rope_parameters["full_attention"] is None: NoPE full attention
    "bert-generation": "learned",
    "big_bird": "learned",
    "bigbird_pegasus": "learned",
    "bitnet": "rope",
    "blenderbot": "learned",
    "blenderbot-small": "learned",
    "blt": "rope",  # local_encoder.layers over the bytes, rotated by local_encoder.rotary_emb (encoder_config)
    "clip_text_model": "learned",
    "cohere2": "rope nope=2",  # apply_rotary_pos_emb only `if self.sliding_window is not None`
    "cohere2_moe": "rope nope=2 family=moe",
    "convbert": "learned",
    "cpmant": "relative",  # CpmAntSegmentPositionEmbedding: bucketed relative bias
    "ctrl": "fixed",  # positional_encoding(): a sinusoidal buffer pos_encoding
    "cwm": "rope",
    "data2vec-text": "learned@1",
    "deepseek_v2": "rope family=moe",
    "deepseek_v3": "rope family=moe",
    "deepseek_v32": "rope family=moe",
    "deepseek_v4": "rope sets=2 dims=2 family=moe",  # head_dim 8 x partial_rotary_factor 0.125: one pair
    "diffllama": "rope",
    "doge": "rope",
    "ernie4_5": "rope",
    "ernie4_5_moe": "rope family=moe",
    # rope_parameters["full_attention"] is None, so the model hands full attention no tables (NoPE); shrunk to
    # [sliding dense, sliding MoE, full MoE] (a full layer every 4th, one dense block first)
    "ergo": "rope nope=3 family=moe",
    "esmc": "rope family=encoder",
    "eurobert": "rope family=encoder",
    "exaone": "rope",
    "exaone4": "rope nope=2",  # RoPE `if self.sliding_window is None or self.is_sliding`
    "exaone_moe": "rope nope=3 family=moe",
    "falcon_h1": "rope family=hybrid",
    "falcon_mamba": "none family=ssm",
    "flaubert": "learned",
    "flex_olmo": "rope family=moe",
    "flint": "rope nope=1",  # RoPE only in sliding layers; block 1 is full attention
    "fnet": "learned",
    "fsmt": "fixed@1",  # SinusoidalPositionalEmbedding.get_embedding, positions from padding_idx + 1
    "funnel": "relative noqk",  # FunnelRelMultiheadAttention (attention_type relative_shift)
    "gemma3n_text": "rope sets=2",
    "gemma4_text": "rope sets=2",
    "gemma4_unified_text": "rope sets=2",
    "glm": "rope",
    "glm4_moe": "rope family=moe",
    "glm4_moe_lite": "rope family=moe",
    "glm_moe_dsa": "rope family=moe",
    "gpt-sw3": "learned",
    "gpt_neox_japanese": "rope",
    "gpt_oss": "rope family=moe",
    "granite_swa": "rope nope=2",  # layer_rope_theta 0 for block 2 (TINY_OVERRIDES)
    "granitemoe_swa": "rope family=moe",
    "granitemoehybrid": "none family=hybrid",  # position_embedding_type None: no RoPE
    "granitemoeshared": "rope family=moe",
    "gte": "rope family=encoder",
    "helium": "rope",
    "hrm_text": "rope",
    "hunyuan_v1_dense": "rope",
    "hunyuan_v1_moe": "rope family=moe",
    "hy_v3": "rope family=moe",
    "hy_v4": "rope family=moe",
    "hyperclovax": "rope",
    "ibert": "learned@1",
    "inkling2_loop_text": "none",  # the text model has no rotary (only the vision tower)
    "inkling2_text": "none",
    "inkling_text": "none",
    "internlm3": "rope",
    "iquestcoder": "rope",
    "jais2": "rope",
    "jetmoe": "rope family=moe",
    "jina_embeddings_v3": "rope family=encoder",
    "kimi_linear": "none family=hybrid",  # MLA layers without RoPE, linear attention beside
    "kolibri1": "rope nope=2",
    # RoPE only `if self.is_sliding and not self.is_kv_shared_layer`: the indexed-attention blocks (2, 3; block 3
    # reads block 2's unrotated keys and values) skip it (TINY_OVERRIDES)
    "kolibri1_1": "rope nope=2,3",
    "laguna": "rope family=moe",
    # its model's loop passes position_embeddings only to sliding layers (None to full attention: NoPE);
    # block 1 is a gated delta net (no attention)
    "lara_mini": "rope nope=3 family=hybrid",
    "layoutlm": "learned",
    "led": "learned",
    "lfm2": "rope family=hybrid",
    "lfm3": "rope sets=2 family=hybrid",
    "longcat_flash": "rope family=moe",
    "longformer": "learned@1",
    "longt5": "relative",
    "luke": "learned@1",
    "m2m_100": "fixed@2",
    "marian": "fixed",  # MarianSinusoidalPositionalEmbedding.create_weight(): computed, not stored
    "mbart": "learned@2",
    "mellum": "rope",
    "mimo_v2_flash": "rope sets=2 family=moe",
    "minicpm3": "rope",
    "minicpm5_moe": "rope family=moe",
    "minimax": "rope family=hybrid",
    "minimax_m2": "rope family=moe",
    "minimax_m3_vl_text": "rope family=moe",
    "ministral": "rope",
    "ministral3": "rope",
    "mobilebert": "learned",
    "modernbert-decoder": "rope sets=2",
    "molmo2_text": "rope",
    "moshi": "rope",
    "mra": "learned@2",  # position_ids start at 2
    "mt5": "relative",
    "musicflamingo": "rope",  # max_position_embeddings = rope_theta (1200.0) is its audio rotary's divisor
    "mvp": "learned@2",
    "nanochat": "rope",
    "nemotron": "rope",
    "nemotron_h": "none family=hybrid",  # its attention applies no rotary
    "neomme": "rope sets=2",
    "nllb-moe": "fixed@2 family=moe",
    "nomic_bert": "rope family=encoder",
    "nystromformer": "learned@2",
    "olmo_hybrid": "rope nope=1 family=hybrid",  # its loop passes RoPE to full attention only; block 1: linear
    "openai-gpt": "learned",  # positions_embed
    "pegasus": "fixed",  # PegasusSinusoidalPositionalEmbedding.create_weight()
    "pegasus_x": "fixed",  # PegasusXSinusoidalPositionalEmbedding: computed in forward
    "param2moe": "rope family=moe",
    "persimmon": "rope",
    "phimoe": "rope family=moe",
    "plbart": "learned@2",
    "prophetnet": "learned@1",
    "qwen3_5_moe_text": "rope family=hybrid",
    "qwen3_5_text": "rope family=hybrid",
    "qwen3_moe": "rope family=moe",
    "qwen3_next": "rope family=hybrid",
    "recurrent_gemma": "rope family=hybrid",
    "reformer": "learned",  # AxialPositionEmbeddings: 8 x 8 factor rows, broadcast and concatenated
    "rembert": "learned",
    "roberta-prelayernorm": "learned@1",
    "roc_bert": "learned",
    "rwkv": "none noqk family=ssm",  # time mixing: receptance, key, value and a decay, no query
    "sarvam_mla": "rope family=moe",
    "sarvam_moe": "rope family=moe",
    "seed_oss": "rope",
    "solar_open": "rope family=moe",
    "squeezebert": "learned",
    "switch_transformers": "relative family=moe",
    "t5gemma": "rope",
    "tapas": "learned",
    "tipsv2_text_model": "fixed",
    "ultrabert": "rope sets=2 family=encoder",
    "ultravbert": "rope sets=2 family=encoder",
    "umt5": "relative",
    "vaultgemma": "rope",
    "xlm": "learned",
    "xlm-roberta-xl": "learned@1",
    "xlnet": "relative",  # XLNetRelativeAttention: relative positional attention
    "xlstm": "none",  # mLSTM: q . k under exponential gates (a gated linear attention), no position module
    "xmod": "learned@1",
    "yoso": "learned@2",
    "youtu": "rope",
    "zamba2": "none family=hybrid",  # use_mem_rope off by default
    "zaya": "rope family=moe",
}

#: the model types with multi-head latent attention (keys and values expanded from a low-rank latent)
MLA_TYPES = (
    "axk1",
    "axk2",
    "bailing_hybrid",
    "deepseek_v3",
    "deepseek_v32",
    "glm4_moe_lite",
    "glm_moe_dsa",
    "kimi_linear",
    "longcat_flash",
    "minicpm3",
    "sarvam_mla",
    "youtu",
)

#: the values a type needs on top of its shrunk defaults to be consistent at tiny width
TINY_OVERRIDES: dict[str, dict[str, Any]] = {
    "bamba": {"mamba_n_heads": 8, "mamba_d_head": 8, "mamba_d_state": 8, "attn_layer_indices": [1]},
    "granitemoehybrid": {
        "mamba_n_heads": 8,
        "mamba_d_head": 8,
        "mamba_d_state": 8,
        "layer_types": ["mamba", "attention"],
    },
    "esmc": {"num_key_value_heads": HEADS},
    "rwkv": {"attention_hidden_size": WIDTH},
    "led": {"attention_window": [8, 8]},
    # multi-head latent attention computes keys for every head: as many key/value heads as heads
    "deepseek_v2": {"num_key_value_heads": HEADS, "num_experts_per_tok": 2},  # its default top-k is None
    **{model_type: {"num_key_value_heads": HEADS} for model_type in MLA_TYPES},
    "longcat_flash": {"num_key_value_heads": HEADS, "moe_topk": 2},  # moe_topk 12 of 4 + 2 zero experts
    # its embedding width is its hidden size; the cache rounds the query/key and value widths up to 64, the
    # layers do not: factors of 2 make both 64
    "xlstm": {"embedding_dim": WIDTH, "qk_dim_factor": 2.0, "v_dim_factor": 2.0},
    "xmod": {"default_language": "en_XX"},  # the adapter to run; without one its forward refuses
    # one block per H/L stack, one cycle each: num_hidden_layers is the stacks' attention calls (1 x 1 x (1 + 1))
    "hrm_text": {"num_layers_per_stack": 1, "H_cycles": 1, "L_cycles": 1, "L_bp_cycles": [1], "num_hidden_layers": 2},
    # the sizes its config derives from hidden_size at first construction (to_dict() holds the defaults')
    "zamba2": {
        "attention_hidden_size": 2 * WIDTH,
        "attention_head_dim": 2 * WIDTH // HEADS,
        "kv_channels": HEAD_DIM,
        "num_query_groups": HEADS,
        "num_key_value_heads": HEADS,
        "n_mamba_heads": 8,
        "mamba_headdim": 2 * WIDTH // 8,
        "mamba_d_state": 8,
        "adapter_rank": 8,
        "chunk_size": 8,
    },
    "zaya": {"num_experts_per_tok": 1},
    "reformer": {
        "axial_pos_embds_dim": [16, 16],
        "axial_pos_shape": [8, 8],
        "attn_layers": ["local", "lsh"],
        "num_hidden_layers": 2,
        "feed_forward_size": 64,
        "attention_head_size": HEAD_DIM,
        "local_attn_chunk_length": 8,
        "lsh_attn_chunk_length": 8,
        "num_buckets": 4,
    },
    "squeezebert": {"embedding_size": WIDTH},
    "neomme": {
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
        }
    },
    "funnel": {"block_sizes": [1, 1], "block_repeats": [1, 1], "architectures": ["FunnelModel"]},
    "hunyuan_v1_dense": {"head_dim": HEAD_DIM},
    "hunyuan_v1_moe": {"head_dim": HEAD_DIM},
    "ministral": {"head_dim": HEAD_DIM},
    "nemotron": {"num_key_value_heads": 2},
    "gemma3n_text": {"num_kv_shared_layers": 0},
    "granite_swa": {"layer_rope_theta": [10000.0, 0]},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"], "num_hidden_layers": 2, "lru_width": WIDTH},
    # its 50 layers (an indexed attention every 5th, some reading an earlier one's K/V) do not shrink by pattern
    # (kv_source_layers is a per-layer list of layer indices): a sliding layer, an indexer, and an indexed layer
    # reading the indexer's K/V, as its default's second indexed layer reads its first's; head_dim a multiple of
    # 16 (its NVFP4 rounding), one indexer head of the two query heads per key head
    "kolibri1_1": {
        "num_hidden_layers": 3,
        "layer_types": ["sliding_attention", "indexed_attention", "indexed_attention"],
        "kv_source_layers": [0, 1, 1],
        "index_layers": [1],
        "mlp_only_layers": [0],
        "head_dim": 16,
        "index_num_heads": 1,
    },
}

#: text model types that cannot be built from their config class at tiny width, with the reason
UNBUILDABLE = {
    "encoder-decoder": "a composite of two other configs (EncoderDecoderConfig needs an encoder and a decoder); AutoModel has no class for it",
    "trocr": "a decoder for VisionEncoderDecoderModel only: AutoModel has no class for TrOCRConfig",
    "gemma4_unified_assistant": "an assistant head for Gemma 4 Unified: AutoModel has no class for its config",
    "gemma4_assistant": "an assistant head of Gemma 4: its config refuses any hidden_size_per_layer_input but 0, which its defaults set to 256 (a drafting model, not a text model of its own)",
    "musicgen": "a text-to-audio composite (text encoder + audio decoder + codec): its config class builds no model on its own ('MusicgenConfig' has no attribute 'dropout')",
    "musicgen_melody": "a text-to-audio composite, like musicgen",
    "dbrx": "its attention and FFN sizes live in nested DbrxAttentionConfig/DbrxFFNConfig objects that the model reads before the defaults are filled ('DbrxAttentionConfig' object has no attribute 'rope_theta')",
    "esm": "a protein model: its config has no vocabulary by default (vocab_size None), so it builds only from a checkpoint's config",
    "dots1": "its default config leaves a size None that the MoE gate needs (empty() takes 1 positional argument but 3 were given)",
    "dots3_note_text": "its validators tie the sliding-window head_dim to qk_nope_head_dim + qk_rope_head_dim and the key/value heads to the query heads, sizes of a 45-layer per-layer config that do not shrink together",
    "dory": "a looped model (n_input + n_recurrent + n_output layers, 72 by default) whose loop structure does not shrink with the layer count",
    "lfm2_moe": "its default config leaves the dense-layer count None ('NoneType' object is not subscriptable)",
    "modernvbert": "a vision-text model whose text vocabulary default puts padding_idx outside a tiny vocabulary",
    "qwen4_exp_text": "its default config leaves head sizes None (unsupported operand type(s) for //: 'NoneType' and 'NoneType')",
    "zamba": "its shared transformer block's tied-weights pattern is written for the default layer layout (tie_weights_keys fails at 2 layers)",
    "cohere_compass_text": "its default rope_parameters has no 'full_attention' entry that its layer types ask for (KeyError 'full_attention')",
}

#: entries whose tiny config builds and is analysed for its mechanism, but that transformers itself cannot run
#: (geoanalyze refuses them in one line, exit 2, with transformers' reason): a gap of the zoo's tiny config
NOT_RUNNABLE_TINY: dict[str, str] = {}

#: the mechanism gaps that also break the rows (the others' rows are measured, of the wrong mechanism)
GAPS_IN_ROWS: tuple[str, ...] = ()

#: text model types that build but take no token ids in their base model, with the reason
NOT_TEXT_BASE = {
    "perceiver": "PerceiverModel takes embeddings, not token ids (the text preprocessor belongs to PerceiverForMaskedLM)",
}

#: generic entries whose mechanism geoanalyze still gets wrong, with the reason (xfail, strict: a fix shows)
MECHANISM_GAPS: dict[str, str] = {}

#: entries (by name) whose rows fail only because of the forward pass's capture (issue 21's capture side)
AWAITING_CAPTURE: dict[str, str] = {}

#: what a reader of the docs table should know about a generic type
TYPE_NOTES: dict[str, str] = {
    "blt": "hidden and query/key rows are the local encoder's, whose layers run over the input's bytes (RoPE of "
    "its encoder_config); the global transformer runs over patches, and the local decoder and the entropy "
    "patcher are stacks of their own: none of their layers has rows",
    "funnel": "no query/key rows: its relative attention (FunnelRelMultiheadAttention) scores q, k and the "
    "relative positions in its own code, and the first layer of each pooled block scores pooled queries (fewer "
    "positions than the input) against the whole sequence's keys",
    "rwkv": "no query/key rows: its time mixing (RwkvSelfAttention) has keys and values but no queries",
    "xlstm": "query/key rows are its mLSTM cells' queries and keys (a gated linear attention: values weighted by "
    "q . k under exponential input and forget gates, no softmax); no module encodes positions (order comes "
    "from the recurrence)",
}


def generic_entry(model_type: str, spec: str) -> Entry:
    """The entry of a model type stated by its TYPE_KINDS spec."""
    from transformers.models.auto import modeling_auto

    kind, *options = spec.split()
    kind, _, offset = kind.partition("@")
    values = dict(option.partition("=")[::2] for option in options)
    family = values.get("family") or (
        "encoder-decoder"
        if model_type in modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
        else "decoder"
        if model_type in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        else "encoder"
    )
    return Entry(
        model_type,
        model_type,
        family,
        kind,
        TINY_OVERRIDES.get(model_type, {}),
        offset=int(offset or 0),
        rope_dims=int(values.get("dims", 0)),
        rope_base=None,
        nope=tuple(int(block) for block in values["nope"].split(",")) if "nope" in values else (),
        rope_sets=int(values.get("sets", 1)),
        captured="noqk" not in values,
        relative="rel" in values or kind == "relative",
        positions=0,
        generic=True,
        note=TYPE_NOTES.get(model_type, ""),
    )


#: encoder-decoder families whose encoder (saved alone: model.get_encoder()) and decoder (their *ForCausalLM:
#: the seq2seq config with is_decoder true, is_encoder_decoder false, weights under model.decoder.) are
#: zoo entries: name, model type, causal-LM class ("" where the family has none), the config values on top
#: of the type's shrunk defaults (Blenderbot's decoders are deeper than its encoders, as blenderbot-400M-distill's
#: 12 against 2: 3 against 2, its default 24 shrunk; ProphetNet's 12 + 12 layers, left unshrunk by tiny_values)
PARTS = (
    ("Pegasus", "pegasus", "PegasusForCausalLM", {}),
    ("Marian", "marian", "MarianForCausalLM", {}),
    ("M2M100", "m2m_100", "", {}),
    ("LED", "led", "", {}),
    ("mBART", "mbart", "MBartForCausalLM", {}),
    ("PLBart", "plbart", "PLBartForCausalLM", {}),
    ("Blenderbot", "blenderbot", "BlenderbotForCausalLM", {"decoder_layers": 3}),
    ("BlenderbotSmall", "blenderbot-small", "BlenderbotSmallForCausalLM", {}),
    ("NLLB-MoE", "nllb-moe", "", {}),
    ("BigBirdPegasus", "bigbird_pegasus", "BigBirdPegasusForCausalLM", {}),
    ("MVP", "mvp", "MvpForCausalLM", {}),
    ("ProphetNet", "prophetnet", "ProphetNetForCausalLM", {"num_encoder_layers": 2, "num_decoder_layers": 2}),
    ("BART", "bart", "BartForCausalLM", {}),  # its encoder: "BART (encoder only)" below
    ("PEGASUS-X", "pegasus_x", "", {}),
)
#: the encoder classes of encoder-decoder families (a checkpoint saved from the class itself), as PARTS
ENCODER_CLASSES = (
    ("Switch Transformers", "switch_transformers", "SwitchTransformersEncoderModel", {}),
    # T5GemmaEncoderModel refuses a config with is_encoder_decoder true: its checkpoints say false
    ("T5Gemma", "t5gemma", "T5GemmaEncoderModel", {"is_encoder_decoder": False}),
)
#: the PARTS types written by hand in ZOO (not in TYPE_KINDS), as their ZOO entry states them
PART_KINDS = {"bart": "learned@2"}


def _part_entry(name: str, model_type: str, model_class: str, config: dict[str, Any], part: str = "") -> Entry:
    """The encoder-only entry of a PARTS family (model_class "": its get_encoder() saved; or an encoder
    class, part "encoder") or its decoder-only one: the type's mechanism as TYPE_KINDS states it (the
    encoder's and the decoder's embeddings are alike)."""
    from dataclasses import replace

    entry = generic_entry(model_type, TYPE_KINDS.get(model_type) or PART_KINDS[model_type])
    part = part or ("decoder" if model_class else "encoder")
    family = entry.family if entry.family in ("moe", "hybrid") else part
    return replace(
        entry,
        name=f"{name} ({model_class or 'encoder only'})",
        family=family,
        config={**entry.config, **config},
        model_class=model_class,
        part="" if model_class else "encoder",
    )


#: the encoder-only and decoder-only checkpoints of encoder-decoder families, and other variants
VARIANTS: list[Entry] = [
    *(
        _part_entry(name, model_type, cls, config)
        for name, model_type, decoder, config in PARTS
        for cls in ((decoder,) if model_type == "bart" else ("", decoder) if decoder else ("",))
    ),
    *(_part_entry(name, model_type, cls, config, "encoder") for name, model_type, cls, config in ENCODER_CLASSES),
    *(
        Entry(
            f"{name} ({cls})",
            model_type,
            "encoder",
            "relative",
            relative=True,
            positions=0,
            generic=True,
            model_class=cls,
        )
        for name, model_type, cls in (
            ("T5", "t5", "T5EncoderModel"),
            ("mT5", "mt5", "MT5EncoderModel"),
            ("UMT5", "umt5", "UMT5EncoderModel"),
            ("LongT5", "longt5", "LongT5EncoderModel"),
        )
    ),
    Entry("BART (encoder only)", "bart", "encoder", "learned", offset=2, positions=0, generic=True, part="encoder"),
    Entry(
        "DeBERTa-v2 (position buckets)",
        "deberta-v2",
        "encoder",
        "relative",
        {
            "relative_attention": True,
            "position_biased_input": False,
            "position_buckets": 16,
            "max_relative_positions": 32,
        },
        relative=True,
    ),
]

#: the entries of the default run (the rest of the zoo is marked slow): one of each mechanism family
#: and the cases issue 21 names
DEFAULT = {
    "T5 (T5EncoderModel)",
    "Marian (encoder only)",
    "Pegasus (PegasusForCausalLM)",
    "BERT",
    "Llama",
    "GPT-2",
    "BLOOM",
    "T5",
    "Mamba",
    "Gemma3",
    "SmolLM3 (NoPE every 2nd)",
    "cohere2",
    "ctrl",
    "xlnet",
    "openai-gpt",
    "marian",
    "t5gemma",
    "gemma3n_text",
}


#: TYPE_KINDS's types that a later transformers release than the oldest the suite runs on (CI's pin up to
#: 5.24.0) added, with that release: an older installed transformers has no such type, so its entry is
#: skipped there (the census checks that only these are absent, and only below their release)
ADDED_IN = dict.fromkeys(("ergo", "kolibri1_1", "minicpm5_moe", "param2moe"), "5.25.0")


def installed_has(model_type: str) -> bool:
    """Whether the installed transformers is at least the release that added ``model_type`` (ADDED_IN; any
    other type: yes)."""
    import transformers

    added = ADDED_IN.get(model_type)
    return added is None or release(transformers.__version__) >= release(added)


def release(version: str) -> tuple[int, ...]:
    """A version's release numbers: "5.25.0" -> (5, 25, 0), "5.26.0.dev0" -> (5, 26, 0)."""
    return tuple(int(part) for part in version.split(".")[:3])


def full_zoo() -> list[Entry]:
    """The hand-written entries, the variants and one generic entry per other buildable text model type of
    the installed transformers."""
    covered = {entry.model_type for entry in ZOO}
    generic = [generic_entry(t, TYPE_KINDS[t]) for t in sorted(TYPE_KINDS) if t not in covered and installed_has(t)]
    return [*ZOO, *VARIANTS, *generic]
