"""Any checkpoint: every text model type transformers can build is analysed, with the mechanism its config
and modeling code state.

For each tiny random-weight checkpoint (zoo.py): the detected position mechanism and its parameters equal
what the config says; `analyze` runs with --layers all and produces finite hidden-state rows for every
layer, query/key rows for every attention model whose attention can be captured, and a note (never a
refusal) for what it cannot measure. The model types are enumerated from the installed transformers'
auto mappings, so a new release's types fail the census until they are added (or listed as unbuildable).
The default run checks DEFAULT (one of each mechanism family and the cases of issue 21); the rest is slow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geoanalyze.analysis import StressOptions, analyze
from geoanalyze.checkpoints import load_checkpoint

from .conftest import CORPUS
from .zoo import (
    ADDED_IN,
    AWAITING_CAPTURE,
    BLOCKS,
    DEFAULT,
    GAPS_IN_ROWS,
    MECHANISM_GAPS,
    NOT_RUNNABLE_TINY,
    NOT_TEXT_BASE,
    TYPE_KINDS,
    UNBUILDABLE,
    ZOO,
    Entry,
    build_config,
    full_zoo,
    installed_has,
    text_model_types,
)

ALL = full_zoo()
BY_NAME = {entry.name: entry for entry in ALL}
#: how many text model types may be listed as unbuildable: raising it is a decision, made here
UNBUILDABLE_AT_MOST = 17


def options(**overrides: Any) -> StressOptions:
    values: dict[str, Any] = {
        "dataset": str(CORPUS),
        "max_sequences": 48,
        "null_draws": 2,
        "compare": ("sinusoidal",),
        "batch_size": 16,
        "max_positions": 24,
    }
    values.update(overrides)
    return StressOptions(**values)


def _cases(gaps: dict[str, str]) -> list[Any]:
    """Every entry; slow unless in DEFAULT; a known gap an xfail (strict: its fix must remove it from the set)."""
    cases = []
    for name in BY_NAME:
        marks = [] if name in DEFAULT else [pytest.mark.slow]
        if name in gaps:
            marks.append(pytest.mark.xfail(reason=gaps[name], strict=True))
        cases.append(pytest.param(name, marks=marks, id=name))
    return cases


def test_the_zoo_is_broad() -> None:
    assert len(ZOO) >= 40
    assert {entry.family for entry in ALL} >= {"encoder", "decoder", "encoder-decoder", "moe", "hybrid", "ssm"}
    assert {entry.kind for entry in ALL} == {"learned", "fixed", "rope", "alibi", "relative", "none"}
    assert len(BY_NAME) == len(ALL)  # names are unique


def test_every_text_model_type_is_in_the_zoo_or_listed() -> None:
    """The census: each text model type of the installed transformers is in the zoo or, with its reason,
    unbuildable; nothing is listed twice, nothing listed is gone from transformers. A type a later release
    added (ADDED_IN) is absent below that release, and only there."""
    types = text_model_types()
    in_zoo = {entry.model_type for entry in ALL}
    missing = sorted(types - in_zoo - set(UNBUILDABLE) - set(NOT_TEXT_BASE))
    assert not missing, f"new text model types: add them to zoo.TYPE_KINDS (or UNBUILDABLE with a reason): {missing}"
    assert set(UNBUILDABLE) | set(NOT_TEXT_BASE) <= types, "stale entries"
    assert {t for t in TYPE_KINDS if installed_has(t)} <= types, "stale entries"
    assert set(ADDED_IN) <= set(TYPE_KINDS) and not {t for t in TYPE_KINDS if not installed_has(t)} & types
    assert in_zoo <= types
    assert not (set(UNBUILDABLE) | set(NOT_TEXT_BASE)) & in_zoo
    assert all(len(reason) > 20 for reason in UNBUILDABLE.values())
    assert len(UNBUILDABLE) <= UNBUILDABLE_AT_MOST, "a type that cannot be built is a decision: raise the bound here"
    assert set(AWAITING_CAPTURE) <= set(BY_NAME) and set(MECHANISM_GAPS) <= set(BY_NAME)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(UNBUILDABLE))
def test_the_unbuildable_types_do_not_build(model_type: str) -> None:
    """The list hides nothing: each type fails to build from its shrunk defaults (AutoModel.from_config)."""
    import warnings

    from transformers import AutoModel

    from .zoo import generic_entry

    with warnings.catch_warnings(), pytest.raises(Exception):  # noqa: B017 (any failure of transformers)
        warnings.simplefilter("ignore")
        AutoModel.from_config(build_config(generic_entry(model_type, "none"), 400))


def config_rope(config: Any, main: str, weight: str = "") -> tuple[int, float | None]:
    """The rotary dims and base of set ``main`` by the config: qk_rope_head_dim (MLA) or rotary_dim if set,
    else head_dim x partial_rotary_factor; the base rope_theta where the rope type is the default. A config
    that states no width (BLT's four stacks) is read at the sub-config of the module that holds ``weight``,
    the mechanism's first query weight (BLT: local_encoder, built from encoder_config)."""
    if weight and getattr(config, "hidden_size", None) is None:
        import warnings

        import torch
        from transformers import AutoModel

        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = AutoModel.from_config(config)
        parts = weight.split(".")
        owners = [model.get_submodule(".".join(parts[:n])) for n in range(len(parts) - 1, 0, -1)]
        config = next(m.config for m in owners if getattr(getattr(m, "config", None), "hidden_size", None))
    parameters = getattr(config, "rope_parameters", None) or {}
    if isinstance(parameters.get(main), dict):
        parameters = parameters[main]
    elif isinstance(parameters.get("full_attention"), dict):
        parameters = parameters["full_attention"]
    dims = next((getattr(config, k) for k in ("qk_rope_head_dim", "rotary_dim") if getattr(config, k, None)), None)
    if dims is None:
        heads = getattr(config, "num_attention_heads", None) or 1
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        factor = parameters.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None))
        dims = int(head_dim * (1.0 if factor is None else factor))
    default = parameters.get("rope_type", "default") == "default"
    return int(dims) - int(dims) % 2, (parameters.get("rope_theta") if default else None)


def _check_rope(entry: Entry, mechanism: Any, folder: Path) -> None:
    summary = mechanism.summary()["rope"]
    assert len(summary) == entry.rope_sets, summary
    main = summary[mechanism.rope_main]
    attention = set(mechanism.attention_layers)
    nope = tuple(i + 1 for i, layer in enumerate(mechanism.rope_layers) if layer is None and i + 1 in attention)
    assert nope == entry.nope, mechanism.rope_layers
    if not entry.generic:
        assert main["dims"] == entry.rope_dims
        if entry.rope_base is None:
            assert main["base"] is None or main["rope_type"] != "default"
        else:
            assert main["base"] == pytest.approx(entry.rope_base, rel=1e-5)
        return
    from transformers import AutoConfig

    if entry.rope_dims:
        assert main["dims"] == entry.rope_dims, main
    if main["rope_type"] != "default":
        return  # scaled (yarn, llama3, proportional): the type says it, no single base or plain width
    weight = mechanism.qk_weights[0][0] if mechanism.qk_weights else ""
    dims, base = config_rope(AutoConfig.from_pretrained(str(folder)).get_text_config(), mechanism.rope_main, weight)
    assert main["dims"] == (entry.rope_dims or dims), (main, dims)
    if base is not None and main["rope_type"] == "default" and main["dims"] > 2:
        assert main["base"] == pytest.approx(base, rel=1e-4), (main, base)


@pytest.mark.parametrize("name", _cases(MECHANISM_GAPS))
def test_mechanism_matches_the_config(zoo: dict[str, Path], name: str) -> None:
    entry = BY_NAME[name]
    mechanism = load_checkpoint(str(zoo[name])).mechanism
    assert mechanism.kind == entry.kind, mechanism.summary()
    assert bool(mechanism.relative) == entry.relative, mechanism.relative
    if not entry.generic:
        assert mechanism.layers == BLOCKS
    if entry.kind in ("learned", "fixed"):
        assert mechanism.offset == entry.offset
        assert mechanism.max_positions == entry.positions if entry.positions else mechanism.max_positions >= 1
    if entry.kind == "rope":
        _check_rope(entry, mechanism, zoo[name])
    if entry.kind == "alibi":
        assert len(mechanism.alibi_slopes) == entry.heads
        # Press et al.'s slopes for a power-of-two head count: 2^(-8h/H)
        expected = 2.0 ** (-8.0 * np.arange(1, entry.heads + 1) / entry.heads)
        np.testing.assert_allclose(sorted(mechanism.alibi_slopes), sorted(expected), rtol=1e-6)


@pytest.mark.parametrize(
    "name", _cases({**{k: MECHANISM_GAPS[k] for k in GAPS_IN_ROWS}, **AWAITING_CAPTURE, **NOT_RUNNABLE_TINY})
)
def test_every_row_is_measured_or_explained(zoo: dict[str, Path], name: str) -> None:
    entry: Entry = BY_NAME[name]
    result = analyze(str(zoo[name]), options())
    info = result.checkpoint
    assert info is not None and info.position_mechanism["kind"] == entry.kind
    rows = info.rows
    has_vectors = entry.kind in ("learned", "fixed", "rope", "alibi")
    assert rows["position"].startswith("measured") == has_vectors, rows
    assert (str(zoo[name]) in result.scores) == has_vectors
    layers = load_checkpoint(str(zoo[name])).mechanism.layers
    if entry.model_class or entry.part:
        _check_own_weights(zoo[name])
    hidden = [row for row in result.layers if row.projection == "hidden"]
    assert [row.layer for row in hidden] == list(range((BLOCKS if not entry.generic else layers) + 1))
    for row in result.layers:
        assert np.isfinite(row.observed["scaled_stress"]) and np.isfinite(row.observed["monotonicity_violation"]), row
    captured = {row.layer for row in result.layers if row.projection in ("query", "key")}
    attention = set(load_checkpoint(str(zoo[name])).mechanism.attention_layers)
    if entry.captured and (attention or not entry.generic):
        assert rows["query_key"].startswith("measured"), rows
        assert captured, rows
        expected = attention if entry.generic else set(range(1, BLOCKS + 1))
        if entry.family != "hybrid":  # a hybrid's linear attentions (Jamba's, MiniMax's) are not captured
            assert captured == expected, (captured, expected)
        assert captured <= expected
    else:
        assert rows["query_key"].startswith("skipped: "), rows
        assert not captured


def _check_own_weights(folder: Path) -> None:
    """The forward pass of an encoder-only (or other variant) checkpoint runs its own weights: every model
    parameter that a tensor of the files names (by suffix) holds that tensor's values."""
    import torch

    from geoanalyze.checkpoints.hidden import load_model

    checkpoint = load_checkpoint(str(folder))
    loaded = load_model(checkpoint, "cpu", torch.float32, False)
    model = loaded[0] if isinstance(loaded, tuple) else loaded
    compared = 0
    for name, parameter in model.named_parameters():
        stored = [n for n in checkpoint.tensor_names if n == name or n.endswith("." + name)]
        if len(stored) == 1 and "layer" in name:
            np.testing.assert_array_equal(parameter.detach().numpy(), checkpoint.tensor(stored[0]), err_msg=name)
            compared += 1
    assert compared, "no parameter of the model is named in the files"
