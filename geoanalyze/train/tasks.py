"""What a model is trained on: batches as pure functions of (seed, stream, index).

Every task hands out numpy batches: ``train_batch(step)`` for the update of that step and
``eval_batch(i)`` for the i-th batch of the held-out stream. Each is drawn from its own generator
``default_rng([seed, stream, index])``, so a run resumed at step s sees exactly the batches the
uninterrupted run saw, and every evaluation sees the same held-out batches.

Tasks
-----
order
    Synthetic and order-sensitive. A sequence is ``[CLS] x_1 .. x_L`` where the x are filler
    tokens drawn uniformly from ``order_vocab`` ids, except at two distinct uniformly drawn
    positions p != q, which hold the markers A (at p) and B (at q). The label is 1 if A comes
    first (p < q), else 0.

    Why a model without positional encoding is at chance: swapping A and B gives a sequence
    with the same multiset of tokens and the other label, and the multiset is drawn
    independently of the label (the fillers are i.i.d., (p, q) is a uniform pair of distinct
    positions), so P(label = 1 | multiset) = 1/2 for every multiset. A bidirectional model
    without PE is permutation-equivariant (Theorem 1), so its [CLS] output is a function of the
    multiset alone: no such model can beat 50% accuracy. (A causal model without PE is not
    equivariant, its mask carries order, so gpt without PE may learn the task.)
mlm
    Language modelling on a corpus tokenized once, as every geoanalyze command reads it. bert:
    each non-special token is chosen with probability ``mask_prob``; a chosen token becomes
    [MASK] (80%), a random non-special token (10%) or stays (10%), and only chosen tokens carry a
    label (others -100; padding and special tokens are never chosen). gpt: the label at t is the
    token at t + 1 (the model's logits are not shifted), -100 at the last token and at padding.
lm
    Next-token language modelling on contiguous text: every text of the corpus tokenized (no
    truncation, no special tokens) and concatenated into one stream; a batch holds blocks of
    ``max_length`` + 1 consecutive tokens at uniformly drawn offsets, the input is the first
    ``max_length`` and the label at t is the token at t + 1 (every position labelled, no padding).
    Held-out batches are consecutive non-overlapping blocks of the held-out stream, in order.
    Needs a causal model (arch gpt).
classification
    The ``label`` column of a labelled corpus (SST-2 by default): texts tokenized once, the class
    read from [CLS] (bert) or the last real token (gpt).

Corpus tasks read ``eval_split`` as the held-out stream; when it is None or the source has no
splits (a file, a synthetic spec), the last 10% of the training texts are held out instead.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..corpus.sources import default_tokenizer, resolve_source
from ..corpus.tokenize import BUILTIN_TOKENIZERS, HFTokenizer, get_tokenizer
from ..errors import FormatError, InputError
from .config import TrainConfig

IGNORE = -100  # the label of a token without a loss (torch's cross_entropy ignore_index)
TRAIN_STREAM, EVAL_STREAM = 0, 1
HELD_OUT_FRACTION = 0.1


@dataclass(frozen=True)
class Batch:
    """One batch, numpy int64 arrays.

    input_ids : (B, T) token ids.
    attention_mask : (B, T), 1 at real tokens and 0 at padding (right padding).
    labels : (B,) classes for sequence tasks; (B, T) token ids with -100 where no loss for mlm.
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    labels: np.ndarray


def stream_rng(seed: int, stream: int, index: int) -> np.random.Generator:
    """The generator of batch ``index`` of ``stream``: a pure function of its arguments."""
    return np.random.default_rng([seed, stream, index])


class Task(ABC):
    """The interface the training loop sees."""

    name: str
    #: ids the model must embed
    vocab_size: int
    #: classes of a sequence task; 0 for a token task (mlm)
    n_classes: int
    #: longest sequence a batch holds (special tokens included)
    max_length: int

    @abstractmethod
    def train_batch(self, step: int) -> Batch:
        """The batch of training step ``step``."""

    @abstractmethod
    def eval_batch(self, index: int) -> Batch:
        """Batch ``index`` of the held-out stream."""


# --- order --------------------------------------------------------------------------------------


class OrderTask(Task):
    """Which of two markers comes first (see the module docstring). Ids: fillers 0..K-1, A = K, B = K+1, [CLS] = K+2."""

    name = "order"
    n_classes = 2

    def __init__(self, length: int, n_fillers: int, batch_size: int, seed: int) -> None:
        if length < 3:
            raise InputError(f"the order task needs order_length >= 3 ([CLS] and two markers), got {length}")
        self.max_length = length
        self.n_fillers = n_fillers
        self.marker_a, self.marker_b, self.cls_id = n_fillers, n_fillers + 1, n_fillers + 2
        self.vocab_size = n_fillers + 3
        self.batch_size = batch_size
        self.seed = seed

    def train_batch(self, step: int) -> Batch:
        return self._draw(stream_rng(self.seed, TRAIN_STREAM, step))

    def eval_batch(self, index: int) -> Batch:
        return self._draw(stream_rng(self.seed, EVAL_STREAM, index))

    def _draw(self, rng: np.random.Generator) -> Batch:
        B, L = self.batch_size, self.max_length - 1
        content = rng.integers(self.n_fillers, size=(B, L))  # (B, L) i.i.d. fillers
        p, q = np.argsort(rng.random((B, L)), axis=1)[:, :2].T  # (B,) each: a uniform pair of distinct positions
        rows = np.arange(B)
        content[rows, p] = self.marker_a
        content[rows, q] = self.marker_b
        ids = np.concatenate([np.full((B, 1), self.cls_id), content], axis=1)  # (B, L + 1)
        return Batch(ids.astype(np.int64), np.ones_like(ids, dtype=np.int64), (p < q).astype(np.int64))


# --- corpora ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Vocabulary:
    """The ids a corpus task needs besides the text's.

    size : ids the model embeds.
    pad_id, mask_id : padding and [MASK] (mask_id -1 when the tokenizer has none).
    special_ids : ids never masked (padding, [CLS], [SEP], ...).
    prefix_id : an id put before every sequence ([CLS] for corpus-built vocabularies), or None
        when the tokenizer adds its own special tokens.
    """

    size: int
    pad_id: int
    mask_id: int
    special_ids: np.ndarray
    prefix_id: int | None

    @property
    def plain_ids(self) -> np.ndarray:
        """The ids that are not special: what a masked token may be replaced with."""
        return np.setdiff1d(np.arange(self.size), self.special_ids)


@dataclass(frozen=True)
class EncodedTexts:
    """Texts tokenized once: one flat id array, and where each text starts and how long it is."""

    flat: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray

    @classmethod
    def from_flat(cls, flat: np.ndarray, lengths: np.ndarray) -> EncodedTexts:
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        return cls(flat.astype(np.int64), offsets, lengths.astype(np.int64))

    def __len__(self) -> int:
        return len(self.lengths)

    def pad(self, rows: np.ndarray, vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
        """The texts ``rows`` as a right-padded (B, T) id array and its attention mask, T the longest."""
        start = 0 if vocab.prefix_id is None else 1
        lengths = self.lengths[rows] + start  # (B,)
        columns = np.arange(int(lengths.max()))  # (T,)
        mask = columns[None, :] < lengths[:, None]  # (B, T)
        source = np.clip(self.offsets[rows][:, None] + columns[None, :] - start, 0, len(self.flat) - 1)  # (B, T)
        ids = np.where(mask, self.flat[source], vocab.pad_id)
        if vocab.prefix_id is not None:
            ids[:, 0] = vocab.prefix_id
        return ids.astype(np.int64), mask.astype(np.int64)


class CorpusTask(Task):
    """mlm or classification over texts tokenized once (see the module docstring)."""

    def __init__(
        self,
        name: str,
        train: EncodedTexts,
        held_out: EncodedTexts,
        vocab: Vocabulary,
        config: TrainConfig,
        labels: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.name = name
        self.train, self.held_out, self.vocab = train, held_out, vocab
        self.labels = labels
        self.vocab_size = vocab.size
        self.n_classes = 0 if labels is None else max(2, int(max(labels[0].max(), labels[1].max())) + 1)
        self.max_length = config.max_length
        self.batch_size = config.batch_size
        self.seed = config.seed
        self.mask_prob = config.mask_prob
        self.causal = config.model.causal

    def train_batch(self, step: int) -> Batch:
        rng = stream_rng(self.seed, TRAIN_STREAM, step)
        rows = rng.integers(len(self.train), size=self.batch_size)
        return self._batch(self.train, rows, rng, 0)

    def eval_batch(self, index: int) -> Batch:
        # The held-out texts in order, wrapping around: every evaluation sees the same ones.
        rows = (np.arange(self.batch_size) + index * self.batch_size) % len(self.held_out)
        return self._batch(self.held_out, rows, stream_rng(self.seed, EVAL_STREAM, index), 1)

    def _batch(self, texts: EncodedTexts, rows: np.ndarray, rng: np.random.Generator, split: int) -> Batch:
        ids, mask = texts.pad(rows, self.vocab)
        if self.labels is not None:
            return Batch(ids, mask, self.labels[split][rows])
        if self.causal:
            return Batch(ids, mask, next_token_labels(ids, mask))
        inputs, labels = mask_tokens(ids, mask, rng, self.vocab, self.mask_prob)
        return Batch(inputs, mask, labels)


def mask_tokens(
    ids: np.ndarray, attention_mask: np.ndarray, rng: np.random.Generator, vocab: Vocabulary, mask_prob: float
) -> tuple[np.ndarray, np.ndarray]:
    """BERT's masking: returns (inputs, labels), labels -100 except at the chosen tokens.

    Each real, non-special token is chosen with probability ``mask_prob``; a chosen token becomes
    [MASK] with probability 0.8, a uniformly drawn non-special token with 0.1, and stays with 0.1.
    """
    candidates = attention_mask.astype(bool) & ~np.isin(ids, vocab.special_ids)  # (B, T)
    chosen = candidates & (rng.random(ids.shape) < mask_prob)
    action = rng.random(ids.shape)
    inputs = ids.copy()
    inputs[chosen & (action < 0.8)] = vocab.mask_id
    randomised = chosen & (action >= 0.8) & (action < 0.9)
    plain = vocab.plain_ids
    inputs[randomised] = plain[rng.integers(len(plain), size=int(randomised.sum()))]
    return inputs, np.where(chosen, ids, IGNORE)


def next_token_labels(ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """labels[t] = ids[t + 1] where token t + 1 is real; -100 at the last position and at padding."""
    labels = np.full_like(ids, IGNORE)
    labels[:, :-1] = np.where(attention_mask[:, 1:].astype(bool), ids[:, 1:], IGNORE)
    return labels


# --- lm: contiguous blocks ----------------------------------------------------------------------


class LMTask(Task):
    """Next-token prediction on blocks of one token stream (see the module docstring)."""

    name = "lm"
    n_classes = 0

    def __init__(self, train: np.ndarray, held_out: np.ndarray, vocab_size: int, config: TrainConfig) -> None:
        self.max_length = config.max_length
        for label, stream in (("training", train), ("held-out", held_out)):
            if len(stream) < self.max_length + 1:
                raise InputError(
                    f"the {label} stream of {config.dataset} has {len(stream)} tokens, fewer than one block of "
                    f"max_length + 1 = {self.max_length + 1}; lower max_length or pass a larger corpus"
                )
        self.train, self.held_out = train.astype(np.int64), held_out.astype(np.int64)
        self.vocab_size = vocab_size
        self.batch_size = config.batch_size
        self.seed = config.seed

    def train_batch(self, step: int) -> Batch:
        rng = stream_rng(self.seed, TRAIN_STREAM, step)
        starts = rng.integers(len(self.train) - self.max_length, size=self.batch_size)  # (B,)
        return lm_batch(self.train, starts, self.max_length)

    def eval_batch(self, index: int) -> Batch:
        # Consecutive blocks, wrapping around: every evaluation scores the same tokens.
        blocks = (len(self.held_out) - 1) // self.max_length
        starts = ((np.arange(self.batch_size) + index * self.batch_size) % blocks) * self.max_length
        return lm_batch(self.held_out, starts, self.max_length)


def lm_batch(stream: np.ndarray, starts: np.ndarray, length: int) -> Batch:
    """Blocks stream[s : s + length] as inputs and stream[s + 1 : s + length + 1] as labels, (B, length) each."""
    index = starts[:, None] + np.arange(length + 1)[None, :]  # (B, length + 1)
    block = stream[index]
    return Batch(block[:, :-1], np.ones((len(starts), length), dtype=np.int64), block[:, 1:])


def build_lm_task(config: TrainConfig) -> LMTask:
    """Read both splits, tokenize every text whole (no truncation, no special tokens) and concatenate."""
    if not config.model.causal:
        raise InputError("task lm predicts the next token and needs a causal model; set model.arch to gpt")
    train_texts, held_texts = _read_splits(config, column=None)
    spec = config.tokenizer or default_tokenizer(config.dataset)
    tokenizer = get_tokenizer(spec, max_length=LM_TEXT_LIMIT, add_special_tokens=False)
    streams = [tokenizer.encode_batch(texts)[0] for texts in (train_texts, held_texts)]
    return LMTask(streams[0], streams[1], tokenizer.vocab_size, config)


#: tokens per text the lm task keeps: no text of a real corpus is that long, so nothing is cut
LM_TEXT_LIMIT = 1 << 30


# --- building a task ----------------------------------------------------------------------------


def build_task(config: TrainConfig) -> Task:
    """The task ``config.task`` names, its data read and tokenized."""
    if config.task == "order":
        return OrderTask(config.order_length, config.order_vocab, config.batch_size, config.seed)
    if config.task == "lm":
        return build_lm_task(config)
    train_texts, held_texts = _read_splits(config, column=None)
    labels = None
    if config.task == "classification":
        label_texts = _read_splits(config, column="label")
        labels = (_parse_labels(label_texts[0], config), _parse_labels(label_texts[1], config))
        for texts, classes in zip((train_texts, held_texts), labels, strict=True):
            if len(texts) != len(classes):
                raise FormatError(
                    f"{config.dataset}: {len(texts)} non-blank texts but {len(classes)} labels; "
                    "remove the rows with a blank text"
                )
    train, held_out, vocab = _encode(config, train_texts, held_texts)
    return CorpusTask(config.task, train, held_out, vocab, config, labels)


def _read_splits(config: TrainConfig, column: str | None) -> tuple[list[str], list[str]]:
    """(training texts, held-out texts) of ``column`` (None: the text column)."""
    source = resolve_source(config.dataset, config.split, config.data_dir, column)
    needs_column = InputError(
        f"task classification needs a {column!r} column in {config.dataset}; pass a labelled dataset such as sst2"
    )
    if column is not None and not source.has_columns():
        raise needs_column
    try:
        texts = source.read()
    except InputError as exc:
        if column is None:
            raise
        raise needs_column from exc
    if config.eval_split is not None and source.split is not None:
        held = resolve_source(config.dataset, config.eval_split, config.data_dir, column).read()
        # The limit applies after reading: read() drops blank texts, and the label column must stay aligned.
        return texts[: config.limit], held[: config.limit]
    texts = texts[: config.limit]
    if len(texts) < 2:
        raise InputError(f"{config.dataset} holds {len(texts)} text; hold-out needs at least 2, pass a larger corpus")
    cut = len(texts) - max(1, int(len(texts) * HELD_OUT_FRACTION))
    return texts[:cut], texts[cut:]


def _parse_labels(values: list[str], config: TrainConfig) -> np.ndarray:
    try:
        labels = np.asarray(values, dtype=np.int64)
    except ValueError:
        bad = next(value for value in values if not value.strip().lstrip("+-").isdigit())
        raise FormatError(
            f"{config.dataset}: label {bad[:40]!r} is not an integer; the label column must hold classes 0, 1, ..."
        ) from None
    if labels.size and labels.min() < 0:
        raise InputError(
            f"{config.dataset} has label {labels.min()} (unlabelled rows, as in a hidden test split); "
            "train and evaluate on labelled splits (train, validation)"
        )
    return labels


def _encode(
    config: TrainConfig, train: list[str], held_out: list[str]
) -> tuple[EncodedTexts, EncodedTexts, Vocabulary]:
    """Tokenize both splits once; a corpus-built vocabulary gets [PAD], [MASK] and [CLS] after its tokens."""
    spec = config.tokenizer or default_tokenizer(config.dataset)
    builtin = spec in BUILTIN_TOKENIZERS
    # A built vocabulary's [CLS] is added here, so the tokenizer leaves room for it.
    tokenizer = get_tokenizer(spec, max_length=config.max_length - 1 if builtin else config.max_length)
    encoded = [EncodedTexts.from_flat(*tokenizer.encode_batch(texts)) for texts in (train, held_out)]
    if isinstance(tokenizer, HFTokenizer):
        hf = tokenizer.hf
        if hf.pad_token_id is None:
            raise InputError(f"tokenizer {spec!r} has no padding token; pass a BERT-style tokenizer")
        mask_id = -1 if hf.mask_token_id is None else int(hf.mask_token_id)
        special = np.union1d(tokenizer.special_ids, [hf.pad_token_id]).astype(np.int64)
        vocab = Vocabulary(tokenizer.vocab_size, int(hf.pad_token_id), mask_id, special, None)
    else:
        size = tokenizer.vocab_size
        vocab = Vocabulary(size + 3, size, size + 1, np.arange(size, size + 3), size + 2)
    if config.task == "mlm" and not config.model.causal and vocab.mask_id < 0:
        raise InputError(f"tokenizer {spec!r} has no [MASK] token, which masked-LM needs; pass a BERT-style tokenizer")
    return encoded[0], encoded[1], vocab
