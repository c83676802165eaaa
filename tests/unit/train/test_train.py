"""Training: config resolution, the tasks' batches, the learning-rate schedule, and exact resume."""

from __future__ import annotations

import inspect
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from geoanalyze.errors import FormatError, IncompatibleError, InputError
from geoanalyze.models import ModelConfig, Transformer
from geoanalyze.train import PRESETS, TrainConfig, build_task, loop, lr_at, resolve_config, train, valid_keys
from geoanalyze.train.tasks import IGNORE, OrderTask, Vocabulary, mask_tokens, next_token_labels

TINY = [
    "task=order",
    "model.d_model=32",
    "model.n_layers=2",
    "model.n_heads=4",
    "model.d_ff=64",
    "model.n_positions=16",
    "model.dropout=0.1",  # dropout on: resuming must reproduce its masks too
    "order_length=12",
    "max_length=12",
    "batch_size=16",
    "steps=40",
    "warmup_steps=5",
    "eval_every=10",
    "eval_batches=2",
    "lr=3e-3",
]


def write_corpus(path: Path, n: int = 60) -> Path:
    """A TSV with sentence and label columns; the label is whether 'good' occurs."""
    rng = np.random.default_rng(0)
    words = ["good", "bad", "film", "plot", "actor", "the", "a", "long", "short", "story"]
    rows = ["sentence\tlabel"]
    for _ in range(n):
        text = " ".join(rng.choice(words, size=rng.integers(3, 9)))
        rows.append(f"{text}\t{int('good' in text.split())}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


# --- configuration ------------------------------------------------------------------------------


def test_presets_resolve() -> None:
    assert resolve_config("ci") == TrainConfig() == resolve_config(None)
    paper = resolve_config("paper")
    model = paper.model
    assert (model.d_model, model.n_layers, model.n_heads, model.d_ff, model.n_positions) == (768, 12, 12, 3072, 512)
    assert paper.device == "cuda" and paper.max_length == 512 and paper.limit is None
    smoke = resolve_config("smoke")
    assert (smoke.steps, smoke.eval_every, smoke.limit) == (20, 10, 2000) and smoke.model == TrainConfig().model
    assert set(PRESETS) == {"smoke", "ci", "paper"}


def test_set_coerces_to_field_types() -> None:
    config = resolve_config(
        "ci",
        [
            "steps=1_000",
            "lr=3e-4",
            "model.pe=rope",
            "model.arch=gpt",
            "model.pe_rank=none",
            "limit=none",
            "eval_split=null",
            "grad_clip=0",
            "task=mlm",
            "tokenizer=whitespace",
        ],
    )
    assert config.steps == 1000 and isinstance(config.steps, int)
    assert config.lr == 3e-4 and isinstance(config.grad_clip, float)
    assert config.model.pe == "rope" and config.model.arch == "gpt"
    assert config.limit is None and config.eval_split is None
    assert (config.task, config.tokenizer) == ("mlm", "whitespace")
    # a later --set wins; combinations are checked once, at the end
    lowrank = resolve_config("ci", ["model.pe=lowrank", "model.pe_rank=8", "model.pe_trainable=false"])
    assert (lowrank.model.pe_rank, lowrank.model.pe_trainable) == (8, False)
    assert resolve_config("ci", ["steps=5", "steps=7"]).steps == 7


def test_toml_then_set(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('steps = 12\nlr = 1\ntask = "mlm"\n[model]\npe = "alibi"\nn_layers = 3\n', encoding="utf-8")
    config = resolve_config("paper", ["model.n_layers=5"], toml_path=path)
    assert (config.steps, config.lr, config.task) == (12, 1.0, "mlm")
    assert (config.model.pe, config.model.n_layers, config.model.d_model) == ("alibi", 5, 768)
    path.write_text('steps = "12"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"steps must be an integer, got '12'"):
        resolve_config("ci", toml_path=path)
    path.write_text("[optim]\nlr = 1\n", encoding="utf-8")
    with pytest.raises(InputError, match="only \\[model\\]"):
        resolve_config("ci", toml_path=path)
    path.write_text("steps = = 1\n", encoding="utf-8")
    with pytest.raises(FormatError, match="not valid TOML"):
        resolve_config("ci", toml_path=path)
    with pytest.raises(InputError, match="config file not found"):
        resolve_config("ci", toml_path=tmp_path / "absent.toml")


@pytest.mark.parametrize(
    ("preset", "overrides", "message"),
    [
        ("large", [], r"unknown preset 'large'; choose one of smoke, ci, paper"),
        ("ci", ["stpes=10"], r"unknown setting 'stpes'; valid keys: task, steps, .*model\.pe,"),
        ("ci", ["model.colour=red"], r"unknown setting 'model.colour'"),
        ("ci", ["steps=ten"], r"steps must be an integer, got 'ten'"),
        ("ci", ["steps=1.5"], r"steps must be an integer"),
        ("ci", ["lr=fast"], r"lr must be a number, got 'fast'"),
        ("ci", ["lr=nan"], r"lr must be a number"),
        ("ci", ["model.pe_trainable=maybe"], r"pe_trainable must be true or false or none"),
        ("ci", ["steps"], r"not key=value"),
        ("ci", ["task=translation"], r"unknown task 'translation'; choose one of mlm, classification, order"),
        ("ci", ["model.pe=wavelet"], r"unknown pe 'wavelet'; choose one of none, sinusoidal"),
        ("ci", ["device=tpu"], r"unknown device 'tpu'"),
        ("ci", ["steps=0"], r"steps must be at least 1"),
        ("ci", ["mask_prob=2"], r"mask_prob must be within \[0, 1\]"),
    ],
)
def test_bad_settings_fail_in_one_line(preset: str, overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        resolve_config(preset, overrides)
    assert "\n" not in str(caught.value)


def test_valid_keys_cover_both_dataclasses() -> None:
    keys = valid_keys()
    assert "steps" in keys and "model.pe" in keys and "model" not in keys


# --- tasks --------------------------------------------------------------------------------------


def test_order_batches_are_deterministic_and_balanced() -> None:
    task = OrderTask(length=12, n_fillers=8, batch_size=512, seed=3)
    first, again, other = task.train_batch(7), task.train_batch(7), task.train_batch(8)
    assert np.array_equal(first.input_ids, again.input_ids) and np.array_equal(first.labels, again.labels)
    assert not np.array_equal(first.input_ids, other.input_ids)
    assert not np.array_equal(task.eval_batch(7).input_ids, first.input_ids)  # held-out stream is another stream
    assert first.input_ids.shape == (512, 12) and (first.input_ids[:, 0] == task.cls_id).all()
    assert ((first.input_ids == task.marker_a).sum(1) == 1).all() and (
        (first.input_ids == task.marker_b).sum(1) == 1
    ).all()
    assert abs(first.labels.mean() - 0.5) < 0.07
    where_a = (first.input_ids == task.marker_a).argmax(1)
    where_b = (first.input_ids == task.marker_b).argmax(1)
    assert np.array_equal(first.labels, (where_a < where_b).astype(np.int64))


def test_order_label_flips_under_a_permutation_an_equivariant_model_cannot_see() -> None:
    """Swapping the markers keeps the multiset and flips the label; a bert without PE gives the same output."""
    task = OrderTask(length=12, n_fillers=8, batch_size=64, seed=0)
    batch = task.train_batch(1)
    swapped = batch.input_ids.copy()
    swapped[batch.input_ids == task.marker_a] = task.marker_b
    swapped[batch.input_ids == task.marker_b] = task.marker_a
    assert np.array_equal(np.sort(swapped, axis=1), np.sort(batch.input_ids, axis=1))
    where_a, where_b = (swapped == task.marker_a).argmax(1), (swapped == task.marker_b).argmax(1)
    assert np.array_equal((where_a < where_b).astype(np.int64), 1 - batch.labels)
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=task.vocab_size, n_positions=16, d_model=32, n_layers=2, n_heads=4, d_ff=64)
    model = Transformer(ModelConfig(**{**config.to_dict(), "pe": "none", "n_classes": 2, "dropout": 0.0})).eval()
    with torch.no_grad():
        original = model(torch.from_numpy(batch.input_ids))["cls_logits"]
        permuted = model(torch.from_numpy(swapped))["cls_logits"]
    assert torch.allclose(original, permuted, atol=1e-5)


def test_mask_tokens_proportions_and_exclusions() -> None:
    rng = np.random.default_rng(0)
    vocab = Vocabulary(size=1000, pad_id=0, mask_id=1, special_ids=np.array([0, 1, 2, 3]), prefix_id=None)
    ids = rng.integers(4, 1000, size=(400, 200))
    ids[:, 0], ids[:, 1] = 2, 3  # special tokens at the front of each row
    attention = np.ones_like(ids)
    attention[:, 150:] = 0
    ids[:, 150:] = 0  # padding
    inputs, labels = mask_tokens(ids, attention, rng, vocab, mask_prob=0.15)
    chosen = labels != IGNORE
    candidates = 400 * 148
    assert abs(chosen.sum() / candidates - 0.15) < 0.005
    assert not chosen[:, :2].any() and not chosen[:, 150:].any()  # never specials, never padding
    assert np.array_equal(inputs[:, :2], ids[:, :2]) and (inputs[:, 150:] == 0).all()
    assert np.array_equal(labels[chosen], ids[chosen]) and np.array_equal(inputs[~chosen], ids[~chosen])
    as_mask = (inputs[chosen] == 1).mean()
    kept = (inputs[chosen] == ids[chosen]).mean()
    randomised = 1 - as_mask - kept
    assert abs(as_mask - 0.8) < 0.01 and abs(kept - 0.1) < 0.01 and abs(randomised - 0.1) < 0.01
    assert (inputs[chosen] >= 1).all() and not np.isin(inputs[chosen & (inputs != 1)], [0, 2, 3]).any()


def test_next_token_labels() -> None:
    ids = np.array([[5, 6, 7, 0], [8, 9, 0, 0]])
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]])
    assert next_token_labels(ids, mask).tolist() == [[6, 7, IGNORE, IGNORE], [9, IGNORE, IGNORE, IGNORE]]


def test_corpus_tasks_with_a_built_vocabulary(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "reviews.tsv")
    common = ["tokenizer=whitespace", f"dataset={corpus}", "batch_size=64", "max_length=6"]
    mlm = build_task(resolve_config("ci", ["task=mlm", "mask_prob=0.5", *common]))
    batch = mlm.train_batch(1)
    cls_id = mlm.vocab_size - 1  # [PAD], [MASK], [CLS] follow the corpus tokens
    assert (batch.input_ids[:, 0] == cls_id).all() and batch.input_ids.shape[1] <= 6
    assert (batch.labels[:, 0] == IGNORE).all() and (batch.labels[batch.attention_mask == 0] == IGNORE).all()
    assert (batch.labels != IGNORE).any()
    assert np.array_equal(mlm.train_batch(1).input_ids, batch.input_ids)
    assert len(mlm.held_out) == 6 and len(mlm.train) == 54  # a file has no splits: the last 10% are held out
    classification = build_task(resolve_config("ci", ["task=classification", *common]))
    assert classification.n_classes == 2
    held = classification.eval_batch(0)
    labels = [int(line.split("\t")[1]) for line in corpus.read_text().splitlines()[55:]]
    assert held.labels[:6].tolist() == labels  # held-out texts in order, wrapping around
    synthetic = ["dataset=synthetic:drift,n=20,length=8", "batch_size=4"]
    with pytest.raises(InputError, match="needs a 'label' column"):
        build_task(resolve_config("ci", ["task=classification", *synthetic]))
    # a synthetic corpus is tokenized as the pipeline does (whitespace): 20 texts, the last 2 held out
    synthetic_mlm = build_task(resolve_config("ci", ["task=mlm", *synthetic]))
    assert (len(synthetic_mlm.train), len(synthetic_mlm.held_out)) == (18, 2)
    corpus.write_text("sentence\tlabel\ngood film\t1\nbad plot\tpos\n", encoding="utf-8")
    with pytest.raises(FormatError, match="label 'pos' is not an integer"):
        build_task(resolve_config("ci", ["task=classification", *common]))


@pytest.mark.integration
def test_sst2_with_the_bert_tokenizer(shared_data: Path) -> None:
    settings = [f"data_dir={shared_data}", "limit=300", "batch_size=128"]
    mlm = build_task(resolve_config("ci", ["task=mlm", *settings]))
    assert mlm.vocab_size == 30522 and mlm.n_classes == 0
    batch = mlm.train_batch(0)
    special = np.isin(batch.input_ids, [0, 101, 102])  # [PAD], [CLS], [SEP] of bert-base-uncased
    assert special.any() and (batch.labels[special] == IGNORE).all()
    assert (batch.input_ids[:, 0] == 101).all() and (batch.input_ids == 103).any()  # [MASK]
    classification = build_task(resolve_config("ci", ["task=classification", *settings]))
    rows = (shared_data / "sst2" / "validation.tsv").read_text(encoding="utf-8").splitlines()[1:4]
    assert classification.eval_batch(0).labels[:3].tolist() == [int(row.split("\t")[1]) for row in rows]


# --- schedule and optimiser ---------------------------------------------------------------------


def test_learning_rate_schedule() -> None:
    config = resolve_config("ci", ["lr=1e-3", "warmup_steps=10", "steps=110", "min_lr_ratio=0.1"])
    assert lr_at(1, config) == pytest.approx(1e-4)
    assert lr_at(5, config) == pytest.approx(5e-4)
    assert lr_at(10, config) == pytest.approx(1e-3)
    assert lr_at(60, config) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))  # halfway through the cosine
    assert lr_at(110, config) == pytest.approx(1e-4)
    values = [lr_at(step, config) for step in range(10, 111)]
    assert all(a >= b for a, b in itertools.pairwise(values))
    no_warmup = resolve_config("ci", ["warmup_steps=0", "steps=4", "min_lr_ratio=0"])
    assert lr_at(4, no_warmup) == pytest.approx(0.0, abs=1e-12)
    assert lr_at(1, no_warmup) == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi / 4)))


def test_no_weight_decay_on_biases_norms_embeddings_and_positions() -> None:
    model = Transformer(
        ModelConfig(vocab_size=20, n_positions=8, d_model=16, n_heads=2, d_ff=32, n_layers=1, pe="lowrank", pe_rank=2)
    )
    decay, exempt = loop.parameter_groups(model, 0.1)
    names = {id(p): name for name, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert decayed == {
        name
        for name in names.values()
        if name.endswith(("qkv.weight", "proj.weight", "fc.weight", "mlm_transform.0.weight"))
    }
    assert {"tok_emb.weight", "pe.A", "pe.W", "ln_f.weight", "mlm_bias"} <= {names[id(p)] for p in exempt["params"]}
    assert decay["weight_decay"] == 0.1 and exempt["weight_decay"] == 0.0


# --- the loop -----------------------------------------------------------------------------------


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / loop.METRICS_FILE).read_text().splitlines()]


def kill_at(monkeypatch: pytest.MonkeyPatch, function: str, step: int) -> None:
    """Make loop.<function> raise KeyboardInterrupt (a kill) when called for ``step``."""
    real = getattr(loop, function)
    signature = inspect.signature(real)

    def killed(*args, **kwargs):
        if signature.bind(*args, **kwargs).arguments["step"] == step:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, function, killed)


@pytest.mark.parametrize(
    ("function", "step", "logged"),
    [("_train_step", 25, [10, 20]), ("_save_checkpoint", 30, [10, 20, 30])],
    ids=["between-evaluations", "after-logging-before-checkpoint"],
)
def test_a_killed_run_resumes_to_the_same_metrics_and_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, function: str, step: int, logged: list[int]
) -> None:
    config = resolve_config("ci", TINY)
    straight = train(config, tmp_path / "straight", progress=False)
    kill_at(monkeypatch, function, step)
    with pytest.raises(KeyboardInterrupt):
        train(config, tmp_path / "resumed", progress=False)
    monkeypatch.undo()
    assert [line["step"] for line in lines(tmp_path / "resumed")] == logged
    resumed = train(config, tmp_path / "resumed", resume=True, progress=False)

    expected, got = lines(tmp_path / "straight"), lines(tmp_path / "resumed")
    assert [line["step"] for line in got] == [10, 20, 30, 40]
    for a, b in zip(expected, got, strict=True):
        for key in ("lr", "train_loss", "train_accuracy", "eval_loss", "eval_accuracy"):
            assert a[key] == pytest.approx(b[key], abs=1e-6), (a["step"], key)
    assert straight.metrics["eval_loss"] == pytest.approx(resumed.metrics["eval_loss"], abs=1e-6)
    first = Transformer.load(tmp_path / "straight" / loop.CHECKPOINT_DIR).state_dict()
    second = Transformer.load(tmp_path / "resumed" / loop.CHECKPOINT_DIR).state_dict()
    assert all(torch.equal(first[name], second[name]) for name in first)

    # nothing pickled: the checkpoint is safetensors and JSON only
    files = sorted(p.name for p in (tmp_path / "resumed" / loop.CHECKPOINT_DIR).iterdir())
    assert files == ["config.json", "model.safetensors", "optimizer.safetensors", "trainer.json"]
    # resuming a finished run trains nothing and returns its last metrics
    assert train(config, tmp_path / "resumed", resume=True, progress=False) == resumed
    assert len(lines(tmp_path / "resumed")) == 4


def test_resume_and_output_errors(tmp_path: Path) -> None:
    config = resolve_config("ci", [*TINY, "steps=10"])
    with pytest.raises(InputError, match="no checkpoint in"):
        train(config, tmp_path / "run", resume=True, progress=False)
    train(config, tmp_path / "run", progress=False)
    with pytest.raises(InputError, match="already holds a training run; resume it"):
        train(config, tmp_path / "run", progress=False)
    other_model = resolve_config("ci", [*TINY, "steps=20", "model.pe=rope"])
    with pytest.raises(IncompatibleError, match=r"holds a model with pe='learned' but this run asks for 'rope'"):
        train(other_model, tmp_path / "run", resume=True, progress=False)
    other_task = resolve_config("ci", [*TINY, "steps=20", "task=mlm", "tokenizer=whitespace"])
    with pytest.raises(IncompatibleError, match="checkpoint of task order, not mlm"):
        train(other_task, tmp_path / "run", resume=True, progress=False)


def test_sequences_longer_than_the_position_table(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"order_length 32 exceeds model\.n_positions 16; set model\.n_positions"):
        train(resolve_config("ci", [*TINY, "order_length=32"]), tmp_path, progress=False)
    train(resolve_config("ci", [*TINY, "order_length=32", "model.pe=rope", "steps=1"]), tmp_path, progress=False)


def test_cuda_asked_for_but_absent(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA is present here")
    with pytest.raises(InputError, match="device cuda was asked for but CUDA is not available"):
        train(resolve_config("ci", [*TINY, "device=cuda"]), tmp_path, progress=False)
    assert loop.select_device("auto").type == "cpu"


@pytest.mark.parametrize(
    "settings",
    [["task=mlm"], ["task=mlm", "model.arch=gpt"], ["task=classification"], ["task=classification", "model.arch=gpt"]],
    ids=["bert-mlm", "gpt-next-token", "bert-classification", "gpt-classification"],
)
def test_every_task_trains(tmp_path: Path, settings: list[str]) -> None:
    corpus = write_corpus(tmp_path / "reviews.tsv")
    config = resolve_config(
        "ci", [*TINY, "steps=3", "eval_every=2", f"dataset={corpus}", "tokenizer=whitespace", *settings]
    )
    metrics = train(config, tmp_path / "run", progress=False).metrics
    assert metrics["step"] == 3 and math.isfinite(metrics["eval_loss"]) and 0 <= metrics["eval_accuracy"] <= 1
    assert [line["step"] for line in lines(tmp_path / "run")] == [2, 3]


def test_order_task_needs_positions(tmp_path: Path) -> None:
    """Without PE a bert stays at chance on the order task; with a learned table it solves it."""
    accuracy = {}
    for pe in ("none", "learned"):
        settings = ["model.dropout=0", "eval_batches=16", f"model.pe={pe}"]  # the ci preset: order_length 16
        accuracy[pe] = train(resolve_config("ci", settings), tmp_path / pe, progress=False).metrics["eval_accuracy"]
    assert accuracy["none"] < 0.62  # 512 held-out sequences: chance is 0.5 +- 0.022
    assert accuracy["learned"] > 0.9
