"""The commands as a user types them: the installed console script, run in a fresh folder.

Inputs are the synthetic sample corpora (whitespace tokens, so every count can be checked
by hand with collections.Counter). Bad input must end with exit code 2, exactly one line
`error: ...` on stderr, no traceback and no file written.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    DRIFT,
    PNG_SIGNATURE,
    SAMPLES,
    files_under,
    geoanalyze,
    geoanalyze_process,
    hellinger,
    ok,
    read_lines,
)
from test_stress_command import assert_one_error_line

SHIFT = SAMPLES / "shift.txt"
WIDE = {"COLUMNS": "200"}  # the terminal width tables get (read at import: a real process)


def ok_json(*args: Any, cwd: Path) -> Any:
    return json.loads(ok(geoanalyze(*args, "-f", "json", cwd=cwd)).stdout)


def position_counters(texts: Iterable[str]) -> list[Counter[str]]:
    """counters[i][token] = number of texts with ``token`` at position i (whitespace tokens)."""
    counters: list[Counter[str]] = []
    for text in texts:
        for i, token in enumerate(text.split()):
            if i == len(counters):
                counters.append(Counter())
            counters[i][token] += 1
    return counters


def counts_by_token(path: Path) -> list[dict[str, int]]:
    """The rows of a counts file as {token string: count}, whatever the column order."""
    from geoanalyze.corpus.marginals import PositionalCounts

    counts = PositionalCounts.load(path)
    assert counts.vocab is not None
    matrix = counts.counts.tocoo()
    rows: list[dict[str, int]] = [{} for _ in range(counts.n_positions)]
    for i, t, c in zip(matrix.row, matrix.col, matrix.data, strict=True):
        rows[int(i)][counts.vocab[int(t)]] = int(c)
    return rows


def pairwise(points: np.ndarray) -> np.ndarray:
    return np.sqrt(np.square(points[:, None, :] - points[None, :, :]).sum(axis=-1))


@pytest.fixture(scope="module")
def drift_counts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """counts.safetensors of the drift corpus, made by `geoanalyze marginals -o`."""
    folder = tmp_path_factory.mktemp("drift-counts")
    ok(geoanalyze("marginals", DRIFT, "-t", "whitespace", "-o", "counts.safetensors", cwd=folder))
    return folder / "counts.safetensors"


# --- marginals ------------------------------------------------------------------------------


def test_marginals_prints_a_table(tmp_path: Path) -> None:
    result = ok(geoanalyze("marginals", DRIFT, "-t", "whitespace", cwd=tmp_path))
    assert "per-position token counts" in result.stdout
    assert "whitespace" in result.stdout
    assert "2000" in result.stdout
    assert "\x1b[" not in result.stdout  # no colour codes when stdout is not a terminal
    assert result.stderr == ""


def test_marginals_json_and_counts_file_hold_the_counts_of_the_corpus(tmp_path: Path) -> None:
    result = ok_json("marginals", DRIFT, "-t", "whitespace", "-o", "counts.safetensors", cwd=tmp_path)
    counters = position_counters(read_lines(DRIFT))
    assert result["tokenizer"]["name"] == "whitespace"
    assert result["n_sequences"] == 2000
    assert result["n_positions"] == len(counters) == 64
    assert result["vocab_size"] == len(set().union(*counters)) == 500
    assert result["totals"] == [sum(c.values()) for c in counters]
    assert result["nonzero"] == sum(len(c) for c in counters)
    assert result["output"] == "counts.safetensors"
    assert counts_by_token(tmp_path / "counts.safetensors") == [dict(c) for c in counters]


def test_merging_two_corpora_equals_counting_their_concatenation(tmp_path: Path) -> None:
    first = read_lines(DRIFT)[:700]
    second = [" ".join(line.split()[:40]) for line in read_lines(SHIFT)]
    (tmp_path / "a.txt").write_text("\n".join(first) + "\n")
    (tmp_path / "b.txt").write_text("\n".join(second) + "\n")
    (tmp_path / "ab.txt").write_text("\n".join(first + second) + "\n")

    merged = ok_json("marginals", "a.txt", "b.txt", "-t", "whitespace", "-o", "merged.safetensors", cwd=tmp_path)
    whole = ok_json("marginals", "ab.txt", "-t", "whitespace", "-o", "whole.safetensors", cwd=tmp_path)

    assert merged["totals"] == whole["totals"] == [1700] * 40 + [700] * 24  # N_i
    for key in ("n_sequences", "n_positions", "vocab_size", "nonzero", "kept_positions"):
        assert merged[key] == whole[key], key
    assert [note["source"] for note in merged["sources"]] == ["a.txt", "b.txt"]
    expected = [dict(c) for c in position_counters(first + second)]
    assert counts_by_token(tmp_path / "merged.safetensors") == counts_by_token(tmp_path / "whole.safetensors")
    assert counts_by_token(tmp_path / "merged.safetensors") == expected

    # Counts files merge the same way as corpora.
    ok(geoanalyze("marginals", "a.txt", "-t", "whitespace", "-o", "a.safetensors", cwd=tmp_path))
    ok(geoanalyze("marginals", "b.txt", "-t", "whitespace", "-o", "b.safetensors", cwd=tmp_path))
    from_files = ok_json("marginals", "a.safetensors", "b.safetensors", cwd=tmp_path)
    assert from_files["totals"] == whole["totals"]
    assert [note["from"] for note in from_files["sources"]] == ["counts file", "counts file"]


def test_second_run_reads_the_counts_cache(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    shutil.copyfile(DRIFT, corpus)  # a path of its own, so no earlier test has cached it
    first = ok_json("marginals", "corpus.txt", "-t", "whitespace", cwd=tmp_path)
    second = ok_json("marginals", "corpus.txt", "-t", "whitespace", cwd=tmp_path)
    recount = ok_json("marginals", "corpus.txt", "-t", "whitespace", "--no-cache", cwd=tmp_path)
    assert first["sources"] == [{"source": "corpus.txt", "from": str(corpus.resolve())}]
    assert second["sources"] == [{"source": "corpus.txt", "from": "cache"}]
    assert recount["sources"] == first["sources"]
    for key in ("totals", "nonzero", "n_sequences", "vocab_size"):
        assert first[key] == second[key] == recount[key], key


# --- distances and mds ------------------------------------------------------------------------


def test_distances_writes_matrices_and_heatmap(tmp_path: Path, drift_counts: Path) -> None:
    from geoanalyze.geometry.distances import PositionGeometry

    result = ok_json("distances", drift_counts, "-o", "d.safetensors", "--heatmap", "x.png", cwd=tmp_path)
    assert result["sources"] == [{"source": str(drift_counts), "from": "counts file"}]
    assert result["output"] == "d.safetensors"
    assert (tmp_path / "x.png").read_bytes().startswith(PNG_SIGNATURE)

    geometry = PositionGeometry.load(tmp_path / "d.safetensors")
    counters = position_counters(read_lines(DRIFT))
    assert geometry.positions.tolist() == result["positions"] == list(range(64))
    assert geometry.totals.tolist() == result["totals"] == [2000] * 64
    np.testing.assert_allclose(geometry.noise_floor, result["noise_floor"], rtol=0, atol=1e-12)
    for i, j in [(0, 1), (0, 63), (10, 40), (31, 32), (62, 63)]:
        assert geometry.naive[i, j] == pytest.approx(hellinger(counters[i], counters[j]), abs=1e-9)
    assert np.array_equal(geometry.naive, geometry.naive.T)
    assert not np.diag(geometry.naive).any()

    table = ok(geoanalyze("distances", drift_counts, cwd=tmp_path)).stdout
    assert "hellinger distances between positions" in table
    assert "noise fraction" in table


def test_mds_writes_a_low_rank_encoding_and_a_plot(tmp_path: Path, drift_counts: Path) -> None:
    from safetensors.numpy import load_file

    from geoanalyze.geometry.distances import PositionGeometry

    ok(geoanalyze("distances", drift_counts, "-o", "d.safetensors", cwd=tmp_path))
    args = ("mds", drift_counts, "--dim", "16", "--rank", "4", "-o", "pe.safetensors", "--plot", "p.png")
    result = ok_json(*args, cwd=tmp_path)
    assert (result["rank"], result["dim"], result["output"]) == (4, 16, "pe.safetensors")
    assert (tmp_path / "p.png").read_bytes().startswith(PNG_SIGNATURE)

    tensors = load_file(str(tmp_path / "pe.safetensors"))
    pe, a, w = tensors["position_embeddings"], tensors["A"], tensors["W"]
    assert pe.shape == (64, 16)
    assert a.shape == (64, 4)
    assert w.shape == (4, 16)
    np.testing.assert_allclose(w @ w.T, np.eye(4), atol=1e-6)
    np.testing.assert_allclose(pe, a @ w, atol=1e-6)
    np.testing.assert_allclose(pairwise(pe), pairwise(a), atol=1e-5)  # W keeps distances
    assert tensors["positions"].tolist() == list(range(64))

    naive = PositionGeometry.load(tmp_path / "d.safetensors").naive
    upper = np.triu_indices(64, k=1)
    stress = float(np.sum((pairwise(a.astype(np.float64))[upper] - naive[upper]) ** 2) / np.sum(naive[upper] ** 2))
    assert result["stress"] == pytest.approx(stress, rel=1e-4)
    assert result["stress"] == pytest.approx(result["stress_curve"]["4"], rel=1e-12)
    assert result["parameters"] == {
        "factored": 4 * (64 + 16),
        "dense": 64 * 16,
        "saving": pytest.approx(1 - 320 / 1024),
    }

    table = ok(geoanalyze(*args[:6], cwd=tmp_path)).stdout
    assert "classical MDS positional encoding" in table
    assert "stress against rank" in table


def test_mds_of_a_distances_file_equals_mds_of_the_counts(tmp_path: Path, drift_counts: Path) -> None:
    ok(geoanalyze("distances", drift_counts, "-o", "d.safetensors", cwd=tmp_path))
    from_distances = ok_json("mds", "d.safetensors", cwd=tmp_path)
    from_counts = ok_json("mds", drift_counts, cwd=tmp_path)
    assert from_distances["sources"] == [{"source": "d.safetensors", "from": "distances file"}]
    np.testing.assert_allclose(from_distances["eigenvalues"], from_counts["eigenvalues"], rtol=0, atol=1e-12)
    rank = from_distances["effective_rank"]
    assert rank == from_counts["effective_rank"] == from_distances["rank"]
    assert from_distances["stress_curve"][str(rank)] < 1e-10  # the Hellinger matrix is Euclidean
    assert from_distances["negative_mass"] == pytest.approx(0.0, abs=1e-12)


# --- datasets ----------------------------------------------------------------------------------


def table_row(table: str, first_cell: str) -> list[str]:
    """The cells of the row of a table whose first cell is ``first_cell`` (cells two or more spaces apart)."""
    for line in table.splitlines():
        cells = re.split(r" {2,}", line.strip())
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in\n{table}")


def test_datasets_list(tmp_path: Path) -> None:
    table = ok(geoanalyze_process("datasets", "list", cwd=tmp_path, env=WIDE)).stdout
    assert "not set" in table
    assert table_row(table, "sst2")[:3] == ["sst2", "nyu-mll/glue (sst2)", "train, validation, test"]
    assert table_row(table, "imdb")[:3] == ["imdb", "stanfordnlp/imdb", "train, test, unsupervised"]
    assert table_row(table, "synthetic")[0] == "synthetic"
    listing = ok_json("datasets", "list", cwd=tmp_path)
    assert listing["data_dir"] is None
    assert [d["name"] for d in listing["datasets"]] == ["sst2", "imdb", "wikitext2", "synthetic"]
    assert all(d["local_splits"] == [] for d in listing["datasets"])


def test_datasets_list_shows_the_local_splits(tmp_path: Path, shared_data: Path) -> None:
    listing = ok_json("datasets", "list", "--data-dir", shared_data, cwd=tmp_path)
    assert listing["data_dir"] == str(shared_data)
    local = {d["name"]: d["local_splits"] for d in listing["datasets"]}
    assert local == {"sst2": ["train", "validation"], "imdb": ["train"], "wikitext2": ["validation"], "synthetic": []}
    table = ok(geoanalyze_process("datasets", "list", "--data-dir", shared_data, cwd=tmp_path, env=WIDE)).stdout
    assert str(shared_data) in table
    assert table_row(table, "sst2")[3] == "train, validation"
    assert table_row(table, "imdb")[3] == "train"


def test_datasets_synthesize_writes_a_corpus_and_its_marginals(tmp_path: Path) -> None:
    args = ("datasets", "synthesize", "shift", "-o", "out", "--n", "300", "--length", "16", "--vocab", "200")
    result = ok(geoanalyze(*args, cwd=tmp_path))
    assert "wrote" in result.stdout
    lines = read_lines(tmp_path / "out" / "shift.txt")
    assert len(lines) == 300
    assert {len(line.split()) for line in lines} == {16}
    marginals = np.load(tmp_path / "out" / "shift.marginals.npy", allow_pickle=False)
    assert marginals.shape == (16, 200)
    np.testing.assert_allclose(marginals.sum(axis=1), 1.0, atol=1e-12)
    assert {token for line in lines for token in line.split()} <= {f"w{t}" for t in range(200)}

    counted = ok_json("marginals", "out/shift.txt", "-t", "whitespace", cwd=tmp_path)
    assert counted["totals"] == [300] * 16


# --- bad input ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of bad (and some good) inputs, shared by the bad-input cases."""
    from safetensors.numpy import save_file

    folder = tmp_path_factory.mktemp("inputs")
    (folder / "empty.txt").write_bytes(b"")
    (folder / "blank.txt").write_text("\n   \n\t\n")
    (folder / "latin1.txt").write_bytes("caf\u00e9 cr\u00e8me\nna\u00efve\n".encode("latin-1"))
    (folder / "table.tsv").write_text("id\tscore\n1\t0.5\n2\t0.7\n")
    (folder / "random.safetensors").write_bytes(np.random.default_rng(0).bytes(4096))
    save_file({"weight": np.zeros((4, 4), dtype=np.float32)}, str(folder / "foreign.safetensors"))
    (folder / "blocked").write_text("a file where a folder is needed\n")
    (folder / "folder.safetensors").mkdir()
    ok(geoanalyze("marginals", DRIFT, "-t", "whitespace", "-o", "ws.safetensors", cwd=folder))
    ok(geoanalyze("marginals", DRIFT, "-t", "char", "-o", "char.safetensors", cwd=folder))
    ok(geoanalyze("distances", "ws.safetensors", "-o", "d.safetensors", cwd=folder))
    data = (folder / "ws.safetensors").read_bytes()
    (folder / "truncated.safetensors").write_bytes(data[: len(data) // 2])
    return folder


WS = ("-t", "whitespace")
BAD_INPUT = {
    "missing file": ("marginals", "missing.txt", *WS),
    "missing counts file": ("marginals", "missing.safetensors"),
    "empty corpus": ("marginals", "{inputs}/empty.txt", *WS, "-o", "c.safetensors"),
    "blank corpus": ("distances", "{inputs}/blank.txt", *WS, "-o", "d.safetensors"),
    "not UTF-8": ("marginals", "{inputs}/latin1.txt", *WS, "-o", "c.safetensors"),
    "tsv without a text column": ("marginals", "{inputs}/table.tsv", *WS),
    "tsv with a wrong --text-column": ("marginals", "{inputs}/table.tsv", *WS, "--text-column", "text"),
    "known dataset offline, no data dir": ("marginals", "imdb", *WS, "-o", "c.safetensors"),
    "unknown dataset offline": ("distances", "nosuchuser/nosuchdataset", *WS),
    "unknown split": ("marginals", "sst2", "--split", "dev", *WS),
    "unknown tokenizer offline": ("marginals", DRIFT, "-t", "nosuchuser/nosuchtokenizer", "-o", "c.safetensors"),
    "random bytes as counts": ("marginals", "{inputs}/random.safetensors", "-o", "c.safetensors"),
    "truncated counts file": ("distances", "{inputs}/truncated.safetensors", "-o", "d.safetensors"),
    "foreign safetensors": ("marginals", "{inputs}/foreign.safetensors", "-o", "c.safetensors"),
    "foreign safetensors to mds": ("mds", "{inputs}/foreign.safetensors", "-o", "pe.safetensors"),
    "distances file as counts": ("marginals", "{inputs}/d.safetensors"),
    "distances file of another metric": ("mds", "{inputs}/d.safetensors", "--metric", "fisher-rao"),
    "merging tokenizers": ("marginals", "{inputs}/ws.safetensors", "{inputs}/char.safetensors", "-o", "c.safetensors"),
    "every position under --min-count": ("distances", DRIFT, *WS, "--min-count", "100000", "-o", "d.safetensors"),
    "mds, every position under --min-count": ("mds", "{inputs}/ws.safetensors", "--min-count", "100000"),
    "unknown metric": ("distances", "{inputs}/ws.safetensors", "--metric", "cosine", "-o", "d.safetensors"),
    "marginals --format xml": ("marginals", DRIFT, *WS, "--format", "xml", "-o", "c.safetensors"),
    "distances --format xml": ("distances", "{inputs}/ws.safetensors", "-f", "xml"),
    "mds --format xml": ("mds", "{inputs}/ws.safetensors", "-f", "xml", "-o", "pe.safetensors"),
    "datasets list --format xml": ("datasets", "list", "-f", "xml"),
    "marginals -o .npz": ("marginals", DRIFT, *WS, "-o", "counts.npz"),
    "distances -o .npy": ("distances", "{inputs}/ws.safetensors", "-o", "d.npy"),
    "distances --heatmap .jpg": ("distances", "{inputs}/ws.safetensors", "--heatmap", "h.jpg"),
    "mds -o .pt": ("mds", "{inputs}/ws.safetensors", "-o", "pe.pt"),
    "mds --plot .svg": ("mds", "{inputs}/ws.safetensors", "--plot", "p.svg", "-o", "pe.safetensors"),
    "mds --rank above the effective rank": ("mds", "{inputs}/ws.safetensors", "--rank", "1000", "-o", "pe.safetensors"),
    "mds --rank above --dim": ("mds", "{inputs}/ws.safetensors", "--rank", "5", "--dim", "4", "-o", "pe.safetensors"),
    "mds unknown --distance": ("mds", "{inputs}/ws.safetensors", "--distance", "exact", "-o", "pe.safetensors"),
    "unknown synthetic kind": ("datasets", "synthesize", "spiral", "-o", "out"),
    # The first output can be written before the second fails: neither may be left behind.
    "distances, heatmap folder blocked": (
        "distances",
        "{inputs}/ws.safetensors",
        "-o",
        "d.safetensors",
        "--heatmap",
        "{inputs}/blocked/h.png",
    ),
    "mds, plot folder blocked": (
        "mds",
        "{inputs}/ws.safetensors",
        "-o",
        "pe.safetensors",
        "--plot",
        "{inputs}/blocked/p.png",
    ),
    "-o names an existing folder": ("marginals", "{inputs}/ws.safetensors", "-o", "{inputs}/folder.safetensors"),
    "distances, output folder blocked": (
        "distances",
        "{inputs}/ws.safetensors",
        "-o",
        "{inputs}/blocked/d.safetensors",
    ),
}


# Bugs outside the CLI layer, reported; strict, so the fix turns these into failures to remove.
KNOWN_BUGS: dict[str, str] = {}


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(args, id=name, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[name])])
        if name in KNOWN_BUGS
        else pytest.param(args, id=name)
        for name, args in BAD_INPUT.items()
    ],
)
def test_bad_input_is_one_error_line_exit_2_and_no_output(tmp_path: Path, inputs: Path, args: tuple[Any, ...]) -> None:
    argv = [str(a).format(inputs=inputs) for a in args]
    outputs = [
        tmp_path / argv[k + 1] for k, a in enumerate(argv[:-1]) if a in ("-o", "--output", "--heatmap", "--plot")
    ]
    existed = {path for path in outputs if path.exists()}
    before = files_under(tmp_path, inputs)
    result = geoanalyze(*argv, cwd=tmp_path)
    assert_one_error_line(result)
    assert files_under(tmp_path, inputs) == before, "a failed run left files behind"
    for path in outputs:
        assert path.exists() == (path in existed), f"a failed run wrote {path}"


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = geoanalyze("--debug", "marginals", "missing.txt", *WS, cwd=tmp_path)
    assert result.code == 2
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: file not found")
