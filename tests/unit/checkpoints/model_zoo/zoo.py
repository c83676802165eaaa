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
    # DeBERTa's fused in_proj interleaves heads in a layout only its own code splits: no query/key rows.
    Entry("DeBERTa", "deberta", "encoder", "learned", {"relative_attention": True}, relative=True, captured=False),
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
    _rope("RoFormer", "roformer", "encoder", embedding_size=WIDTH, captured=False),
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
    _rope("Falcon (RoPE)", "falcon", num_kv_heads=HEADS, new_decoder_architecture=True, captured=False),
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
        {
            "num_key_value_heads": 2,
            "num_experts": 2,
            "attn_layer_period": 2,
            "attn_layer_offset": 1,
            "expert_layer_period": 2,
            "mamba_d_state": 4,
            "mamba_dt_rank": 4,
        },
    ),
]


def build_config(entry: Entry, vocab_size: int) -> Any:
    from transformers import AutoConfig

    values = {**COMMON, "vocab_size": vocab_size, **entry.config}
    return AutoConfig.for_model(entry.model_type, **values)


def build_checkpoint(entry: Entry, folder: Path, tokenizer: Any, seed: int = 0) -> Path:
    """Save a random-weight model of ``entry`` and the zoo's tokenizer into ``folder``."""
    import warnings

    import torch
    from transformers import AutoModel

    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModel.from_config(build_config(entry, len(tokenizer)))
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
        parts = [f"{entry.rope_dims} of {entry.config.get('head_dim', HEAD_DIM)} dims"]
        scaling = (entry.config.get("rope_scaling") or {}).get("rope_type")
        if scaling:
            parts.append(f"{scaling} scaling")
        elif entry.rope_base:
            parts.append(f"base {entry.rope_base:g}")
        if entry.rope_sets > 1:
            parts.append(f"{entry.rope_sets} sets by layer type")
        if entry.nope:
            parts.append(f"NoPE in block {', '.join(map(str, entry.nope))}")
        return "RoPE (" + ", ".join(parts) + ")"
    if entry.kind in ("learned", "fixed"):
        text = f"{entry.kind} table" + (f", offset {entry.offset}" if entry.offset else "")
        return text + (", + relative bias" if entry.relative else "")
    if entry.kind == "alibi":
        return f"ALiBi ({entry.heads} heads)"
    if entry.kind == "relative":
        return "relative only"
    return "none"


def markdown_table() -> str:
    """The zoo as docs/checkpoints.md shows it (checked against the file by a test)."""
    lines = [
        "| architecture | model_type | family | positions (detected) | position row | query/key rows |",
        "|---|---|---|---|---|---|",
    ]
    for entry in ZOO:
        position = "yes" if entry.kind in ("learned", "fixed", "rope", "alibi") else "no (note)"
        captured = "yes" if entry.captured else "no (note)"
        lines.append(
            f"| {entry.name} | `{entry.model_type}` | {entry.family} | {describe(entry)} | {position} | {captured} |"
        )
    return "\n".join(lines)
