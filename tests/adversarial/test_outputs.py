"""No output may be an input: every command that writes, every kind of input, every way of naming it.

Each case runs the real command line on a sandbox that holds the inputs, and asserts exit 2, one
``error:`` line naming the output and the input (or the bad name), no file created, and every
input byte-identical (:meth:`Sandbox.refused`). The guard runs before any work, so these cases
are fast.
"""

from __future__ import annotations

import os

import pytest

from .harness import ROPE_ON_DRIFT, Sandbox
from .outputs_inputs import CORPUS, QUICK, populate

ROPE_ON_CORP = ["stress", "rope:d=16", "--dataset", "corp", *QUICK]
CKPT_ON_DRIFT = ["stress", "ckpt", "--dataset", "drift.txt", *QUICK]

LONG = "x" * 300
# Ways of naming an existing input through another path.
ALIASES = {
    "symlink": lambda sb, name: _symlink(sb, name),
    "hardlink": lambda sb, name: _hardlink(sb, name),
    "dot-slash": lambda sb, name: f"./{name}",
    "via-folder-symlink": lambda sb, name: _folder_alias(sb, name),
    "dotdot": lambda sb, name: _dotdot(sb, name),
}


def _symlink(sb: Sandbox, name: str) -> str:
    alias = f"alias-{name}"
    os.symlink(name, sb.path(alias))
    return alias


def _hardlink(sb: Sandbox, name: str) -> str:
    alias = f"hard-{name}"
    os.link(sb.path(name), sb.path(alias))
    return alias


def _folder_alias(sb: Sandbox, name: str) -> str:
    os.symlink(".", sb.path("here"))
    return f"here/{name}"


def _dotdot(sb: Sandbox, name: str) -> str:
    sb.path("sub").mkdir()
    return f"sub/../{name}"


# (command args with {out} where the aliased input goes, the input file) for every command writing a file
FILE_OUTPUT_ON_INPUT = {
    "marginals-o-counts": (["marginals", "c.safetensors", "-o", "{out}"], "c.safetensors"),
    "distances-o-counts": (["distances", "c.safetensors", "-o", "{out}"], "c.safetensors"),
    "distances-o-distances": (["distances", "d.safetensors", "-o", "{out}"], "d.safetensors"),
    "mds-o-distances": (["mds", "d.safetensors", "-o", "{out}"], "d.safetensors"),
    "mds-o-counts": (["mds", "c.safetensors", "-o", "{out}"], "c.safetensors"),
    "stress-o-corpus": (["stress", "rope:d=16", "--dataset", "corpus.json", *QUICK, "-o", "{out}"], "corpus.json"),
    "report-o-corpus": (["report", "rope:d=16", "--dataset", "notes.md", *QUICK, "-o", "{out}"], "notes.md"),
    "synthesize-words": (["datasets", "synthesize", "drift", "--words", "{out}", "-o", ".", "--name", "w"], "w.txt"),
}


@pytest.mark.parametrize("alias", ["plain", *ALIASES])
@pytest.mark.parametrize("case", list(FILE_OUTPUT_ON_INPUT))
def test_a_file_output_naming_an_input_is_refused(sandbox: Sandbox, case: str, alias: str) -> None:
    populate(sandbox)
    sandbox.copy_sample("drift.txt", "notes.md")
    sandbox.copy_sample("drift.txt", "w.txt")
    args, name = FILE_OUTPUT_ON_INPUT[case]
    out = name if alias == "plain" else ALIASES[alias](sandbox, name)
    # (synthesize: the alias names the input, --words; its output <name>.txt is that file)
    sandbox.refused(*[a.replace("{out}", out) for a in args], words=("input",))


# Outputs that land inside an input folder, match an input glob, or replace a folder holding an input.
INSIDE: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "marginals-into-corpus-folder": (["marginals", "corp", *CORPUS, "-o", "corp/c2.safetensors"], ("corp",)),
    "marginals-glob-match": (["marginals", "corp/*", *CORPUS, "-o", "corp/new.safetensors"], ("matches",)),
    "marginals-alias-into-folder": (["marginals", "corp", *CORPUS, "-o", "alias/c.safetensors"], ("corp",)),
    "marginals-work-dir-in-corpus": (["marginals", "corp", *CORPUS, "--work-dir", "corp/work"], ("--work-dir",)),
    "marginals-work-dir-is-corpus": (["marginals", "corp", *CORPUS, "--work-dir", "corp"], ("--work-dir",)),
    "distances-work-dir-is-counts": (["distances", "drift.txt", *CORPUS, "--work-dir", "drift.txt"], ("--work-dir",)),
    "distances-work-dir-and-o": (
        ["distances", "drift.txt", *CORPUS, "--work-dir", "w.safetensors", "-o", "w.safetensors"],
        ("--work-dir",),
    ),
    "distances-o-into-corpus": (["distances", "corp", *CORPUS, "-o", "corp/d.safetensors"], ("corp",)),
    "distances-heatmap-into-corpus": (["distances", "corp", *CORPUS, "--heatmap", "corp/h.png"], ("--heatmap",)),
    "distances-heatmap-glob": (["distances", "corp/*", *CORPUS, "--heatmap", "corp/h.png"], ("--heatmap",)),
    "mds-o-into-corpus": (["mds", "corp", *CORPUS, "-o", "corp/p.safetensors"], ("corp",)),
    "mds-plot-into-corpus": (["mds", "corp", *CORPUS, "--plot", "corp/m.png"], ("--plot",)),
    "mds-plot-deep-into-corpus": (["mds", "corp", *CORPUS, "--plot", "corp/new/m.png"], ("--plot",)),
    "mds-checkpoint-output-inside-checkpoint": (
        ["mds", "d.safetensors", "--into-checkpoint", "ckpt", "--checkpoint-output", "ckpt/copy"],
        ("--checkpoint-output", "ckpt"),
    ),
    "mds-o-inside-checkpoint": (
        ["mds", "d.safetensors", "--into-checkpoint", "ckpt", "--checkpoint-output", "new", "-o", "ckpt/p.safetensors"],
        ("ckpt",),
    ),
    "stress-o-into-corpus": ([*ROPE_ON_CORP, "-o", "corp/r.json"], ("corp",)),
    "stress-o-glob": (["stress", "rope:d=16", "--dataset", "corp/*.json", *QUICK, "-o", "corp/r.json"], ("matches",)),
    "stress-plot-dir-is-corpus": ([*ROPE_ON_CORP, "--plot-dir", "corp"], ("corp",)),
    "stress-plot-dir-in-corpus": ([*ROPE_ON_CORP, "--plot-dir", "corp/figs"], ("--plot-dir",)),
    "stress-o-in-checkpoint": ([*CKPT_ON_DRIFT, "-o", "ckpt/r.json"], ("ckpt",)),
    "stress-o-in-model-spec": (
        ["stress", "model:ckpt", "--dataset", "drift.txt", *QUICK, "-o", "ckpt/r.json"],
        ("ckpt",),
    ),
    "stress-plot-dir-is-checkpoint": ([*CKPT_ON_DRIFT, "--plot-dir", "ckpt"], ("ckpt",)),
    "stress-o-in-compare-folder": ([*ROPE_ON_DRIFT, "--compare", "learned:ckpt", "-o", "ckpt/r.json"], ("ckpt",)),
    "stress-o-in-tokenizer-folder": (
        ["stress", "rope:d=16", "--dataset", "drift.txt", "--tokenizer", "ckpt", "--compare", "", "-o", "ckpt/r.json"],
        ("ckpt",),
    ),
    "stress-o-and-plot-dir-same": (
        ["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "-o", "same.json", "--plot-dir", "same.json"],
        ("same.json",),
    ),
    "stress-o-in-data-dir-dataset": (
        ["stress", "rope:d=16", "--dataset", "corp", "--data-dir", ".", *QUICK, "-o", "corp/r.json"],
        ("corp",),
    ),
    "report-o-into-corpus": (["report", "rope:d=16", "--dataset", "corp", *QUICK, "-o", "corp/r.md"], ("corp",)),
    "report-figures-hold-corpus": (
        ["report", "rope:d=16", "--dataset", "r_files/drift.txt", *QUICK, "-o", "r.md"],
        ("figure folder", "r_files"),
    ),
    "report-figures-are-target": (["report", "r_files", "--dataset", "drift.txt", *QUICK, "-o", "r.md"], ("r_files",)),
    "report-o-in-checkpoint": (["report", "ckpt", "--dataset", "drift.txt", *QUICK, "-o", "ckpt/r.md"], ("ckpt",)),
    "train-o-is-corpus-folder": (
        ["train", "-o", "corp", "--task", "mlm", "--dataset", "corp", "--set", "steps=1"],
        ("--output-dir", "corp"),
    ),
    "train-o-in-corpus-folder": (
        ["train", "-o", "corp/run", "--task", "mlm", "--dataset", "corp", "--set", "steps=1"],
        ("--output-dir", "corp"),
    ),
    "train-config-is-its-metrics": (
        ["train", "-o", "run", "--config", "run/metrics.jsonl", "--set", "steps=1"],
        ("run/metrics.jsonl",),
    ),
    "train-corpus-in-its-checkpoint": (
        ["train", "-o", "run", "--task", "mlm", "--dataset", "run/checkpoint/c.txt", "--set", "steps=1"],
        ("run/checkpoint",),
    ),
    "stress-corpus-is-a-figure": (
        ["stress", "rope:d=16", "--dataset", "figs/hellinger.png", *QUICK, "--plot-dir", "figs"],
        ("figs/hellinger.png",),
    ),
    "verify-o-replaces-data-dir": (
        ["verify", "necessity", "-o", "corp", "--data-dir", "corp", "--force", "--device", "cpu"],
        ("--output-dir", "corp"),
    ),
    "verify-o-holds-data-dir": (
        ["verify", "necessity", "-o", "outer", "--data-dir", "outer/data", "--force", "--device", "cpu"],
        ("--output-dir",),
    ),
    "synthesize-o-in-words-folder": (
        ["datasets", "synthesize", "drift", "--words", "corp/words.txt", "-o", "corp", "--name", "words"],
        ("input",),
    ),
}


@pytest.mark.parametrize("case", list(INSIDE))
def test_an_output_inside_or_over_an_input_is_refused(sandbox: Sandbox, case: str) -> None:
    populate(sandbox)
    sandbox.copy_sample("drift.txt", "r_files/drift.txt")
    sandbox.copy_sample("drift.txt", "corp/words.txt")
    sandbox.copy_sample("drift.txt", "corp/corpus.json")
    sandbox.copy_sample("drift.txt", "outer/data/x.txt")
    sandbox.write("run/metrics.jsonl", "")
    sandbox.copy_sample("drift.txt", "run/checkpoint/c.txt")
    sandbox.copy_sample("drift.txt", "figs/hellinger.png")
    os.symlink("corp", sandbox.path("alias"))
    args, words = INSIDE[case]
    sandbox.refused(*args, words=words)


# Names no file system takes, or places no file can go: refused before any work, naming the option.
BAD_PLACES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "marginals-long-name": (["marginals", "drift.txt", *CORPUS, "-o", f"{LONG}.safetensors"], ("--output", "255")),
    "marginals-long-folder": (["marginals", "drift.txt", *CORPUS, "-o", f"{LONG}/c.safetensors"], ("255",)),
    "marginals-under-a-file": (["marginals", "drift.txt", *CORPUS, "-o", "drift.txt/c.safetensors"], ("drift.txt",)),
    "marginals-a-folder": (["marginals", "drift.txt", *CORPUS, "-o", "dir.safetensors"], ("folder",)),
    "distances-long-heatmap": (["distances", "c.safetensors", "--heatmap", f"{LONG}.png"], ("--heatmap", "255")),
    "distances-heatmap-under-file": (["distances", "c.safetensors", "--heatmap", "drift.txt/h.png"], ("--heatmap",)),
    "distances-heatmap-suffix": (["distances", "c.safetensors", "--heatmap", "h.txt"], ("--heatmap", ".png")),
    "distances-heatmap-folder": (["distances", "c.safetensors", "--heatmap", "dir.png"], ("--heatmap", "folder")),
    "distances-long-o": (["distances", "c.safetensors", "-o", f"{LONG}.safetensors"], ("--output", "255")),
    "mds-long-plot": (["mds", "d.safetensors", "--plot", f"{LONG}.png"], ("--plot", "255")),
    "mds-plot-suffix": (["mds", "d.safetensors", "--plot", "m.jpg"], ("--plot", ".png")),
    "mds-plot-under-file": (["mds", "d.safetensors", "--plot", "drift.txt/m.png"], ("--plot",)),
    "mds-checkpoint-output-long": (
        ["mds", "d.safetensors", "--into-checkpoint", "ckpt", "--checkpoint-output", LONG],
        ("--checkpoint-output", "255"),
    ),
    "mds-checkpoint-output-under-file": (
        ["mds", "d.safetensors", "--into-checkpoint", "ckpt", "--checkpoint-output", "drift.txt/x"],
        ("--checkpoint-output",),
    ),
    "stress-long-o": (["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "-o", f"{LONG}.json"], ("255",)),
    "stress-o-under-file": (["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "-o", "drift.txt/r.json"], ()),
    "stress-long-plot-dir": (
        ["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "--plot-dir", LONG],
        ("--plot-dir", "255"),
    ),
    "stress-plot-dir-a-file": (
        ["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "--plot-dir", "drift.txt"],
        ("--plot-dir", "file"),
    ),
    "stress-plot-dir-under-file": (
        ["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "--plot-dir", "drift.txt/figs"],
        ("--plot-dir",),
    ),
    "report-long-o": (["report", "rope:d=16", "--dataset", "drift.txt", *QUICK, "-o", f"{LONG}.md"], ("255",)),
    "report-o-under-file": (["report", "rope:d=16", "--dataset", "drift.txt", *QUICK, "-o", "drift.txt/r.md"], ()),
    "report-figure-folder-a-file": (
        ["report", "rope:d=16", "--dataset", "drift.txt", *QUICK, "-o", "taken.md"],
        ("taken_files", "file"),
    ),
    "train-long-o": (["train", "-o", LONG, "--set", "steps=1"], ("--output-dir", "255")),
    "train-o-a-file": (["train", "-o", "drift.txt", "--set", "steps=1"], ("--output-dir", "file")),
    "train-o-under-file": (["train", "-o", "drift.txt/run", "--set", "steps=1"], ("--output-dir",)),
    "verify-o-a-file": (["verify", "necessity", "-o", "drift.txt", "--device", "cpu"], ("--output-dir", "file")),
    "synthesize-name-parent": (["datasets", "synthesize", "drift", "-o", "s", "--name", "../x"], ("--name",)),
    "synthesize-name-folder": (["datasets", "synthesize", "drift", "-o", "s", "--name", "a/b"], ("--name",)),
    "synthesize-name-absolute": (["datasets", "synthesize", "drift", "-o", "s", "--name", "/tmp/x"], ("--name",)),
    "synthesize-name-dot": (["datasets", "synthesize", "drift", "-o", "s", "--name", "."], ("--name",)),
    "synthesize-name-dotdot": (["datasets", "synthesize", "drift", "-o", "s", "--name", ".."], ("--name",)),
    "synthesize-name-empty": (["datasets", "synthesize", "drift", "-o", "s", "--name", ""], ("--name",)),
    "synthesize-name-blank": (["datasets", "synthesize", "drift", "-o", "s", "--name", "  "], ("--name",)),
    "synthesize-name-long": (["datasets", "synthesize", "drift", "-o", "s", "--name", "y" * 250], ("--name", "255")),
    "synthesize-o-a-file": (["datasets", "synthesize", "drift", "-o", "drift.txt"], ("--output", "file")),
    "synthesize-o-under-file": (["datasets", "synthesize", "drift", "-o", "drift.txt/s"], ("--output",)),
    "synthesize-o-long": (["datasets", "synthesize", "drift", "-o", LONG], ("--output", "255")),
}


@pytest.mark.parametrize("case", list(BAD_PLACES))
def test_an_output_no_file_system_takes_is_refused_before_work(sandbox: Sandbox, case: str) -> None:
    populate(sandbox)
    sandbox.path("dir.safetensors").mkdir()
    sandbox.path("dir.png").mkdir()
    sandbox.write("taken_files", "a file where the report's figure folder goes")
    args, words = BAD_PLACES[case]
    sandbox.refused(*args, words=words)


def test_a_plain_name_and_an_output_beside_the_input_are_accepted(sandbox: Sandbox) -> None:
    """The guard refuses only what it must: an output beside a corpus file, or in its folder's sibling."""
    populate(sandbox)
    sandbox.accepted("datasets", "synthesize", "drift", "-o", "s", "--name", "my-drift.v1", "--n", "20")
    assert sorted(p.name for p in sandbox.path("s").iterdir()) == ["my-drift.v1.marginals.npy", "my-drift.v1.txt"]
    sandbox.accepted("marginals", "corp", *CORPUS, "-o", "c2.safetensors")
    sandbox.accepted("marginals", "corp/*.txt", *CORPUS, "-o", "corp/c3.safetensors")
