"""Campaign 4, the Python API (docs/reliability.md).

* A callable encoding crashed (``AttributeError ... 'split'``), as the target and in ``compare=``,
  though docs/scores.md §6 says a callable is accepted wherever a spec is.
* Calling ``write_report`` twice on one page left the first page's figures in ``p_files/``; the CLI
  replaces the folder whole, and so does the API now.
* (low) A ``pathlib.Path`` dataset raised ``AttributeError``.
* ``cache=False`` neither reads nor writes a cache, in Python as on the command line.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

import geoanalyze as ga

from .harness import SAMPLES

QUICK = {"tokenizer": "whitespace", "null_draws": 2, "limit": 60, "min_count": 5}
CORPUS = SAMPLES / "drift-words.txt"


def ramp(positions: np.ndarray) -> np.ndarray:
    p = np.asarray(positions, dtype=float)
    return np.stack([p, np.sqrt(p + 1.0)], axis=1)


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEOANALYZE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_callable_is_a_target(tmp_path: Path) -> None:
    result = ga.score(ramp, dataset=str(CORPUS), compare="", **QUICK)
    assert result.target == "ramp" and result.kind == "encoding"
    assert np.array_equal(result.vectors["ramp"], ramp(result.positions))
    independent = ga.score_vectors(ramp(result.positions), result.geometry.naive)  # D: --estimate naive
    for key, value in independent.items():
        assert result.scores["ramp"].observed[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


def test_a_callable_is_compared() -> None:
    result = ga.score("rope:d=16", dataset=str(CORPUS), compare=["sinusoidal", ramp], **QUICK)
    assert list(result.scores) == ["rope:d=16", "sinusoidal", "ramp"]
    assert np.array_equal(result.vectors["ramp"], ramp(result.positions))
    assert "ramp" in result.to_markdown()


def test_two_callables_of_one_name_are_refused() -> None:
    from geoanalyze.errors import InputError

    with pytest.raises(InputError, match="'<lambda>'"):
        ga.score("rope:d=16", dataset=str(CORPUS), compare=[lambda p: ramp(p), lambda p: ramp(p) * 2], **QUICK)


def test_a_path_dataset_is_a_dataset() -> None:
    by_path = ga.score("rope:d=16", dataset=CORPUS, compare="", **QUICK)
    by_text = ga.score("rope:d=16", dataset=str(CORPUS), compare="", **QUICK)
    assert by_path.to_json() == by_text.to_json()


def test_write_report_twice_replaces_the_figures_folder(tmp_path: Path) -> None:
    first = ga.score("rope:d=16", dataset=str(CORPUS), compare="", **QUICK)
    second = ga.score("sinusoidal:d=16", dataset=str(CORPUS), compare="", **QUICK)
    page = ga.write_report([first, second], tmp_path / "p.md")
    two = sorted(p.name for p in (tmp_path / "p_files").iterdir())
    assert any(name.startswith("1-") for name in two)
    ga.write_report([first], page)
    one = sorted(p.name for p in (tmp_path / "p_files").iterdir())
    assert one == [name for name in two if name.startswith("0-")]
    linked = {line.split("(")[-1].rstrip(")") for line in page.read_text().splitlines() if line.startswith("![")}
    assert linked == {f"p_files/{name}" for name in one}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["p.md", "p_files"]  # none staged left


def test_cache_false_neither_reads_nor_writes(own_cache: Path) -> None:
    ga.score("rope:d=16", dataset=str(CORPUS), compare="", cache=False, **QUICK)
    assert not own_cache.exists() or not any(p.is_file() for p in own_cache.rglob("*"))


def test_threads_with_and_without_the_cache_keep_their_own_setting(own_cache: Path) -> None:
    """--no-cache is per call: a thread with cache=False does not turn it off for another."""
    results: dict[str, str] = {}

    def run(name: str, cache: bool) -> None:
        results[name] = ga.score("rope:d=16", dataset=str(CORPUS), compare="", cache=cache, **QUICK).to_json()

    threads = [threading.Thread(target=run, args=(f"t{i}", i % 2 == 0)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results.values())) == 1 and len(results) == 4
    assert any(p.is_file() for p in (own_cache / "counts").iterdir())
    assert os.environ.get("GEOANALYZE_CACHE_DIR") == str(own_cache)
