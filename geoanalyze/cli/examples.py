"""One table of examples: the epilog of every command's --help and its section of docs/cli.md.

Each example is a complete command line a newcomer can paste from the repository's root (the
sample corpora ship with it; ``../shared/data`` is the data directory the README's tour uses).
tests/cli/test_newcomer_help.py parses every example against its command and runs them all.
"""

from __future__ import annotations

#: the words after ``geoanalyze`` of a command ("" for the root) -> its examples, each under 76 columns
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": ("geoanalyze stress rope:d=64 --dataset sample_corpora/drift-words.txt",),
    "stress": (
        "geoanalyze stress rope:d=64 --dataset sample_corpora/drift-words.txt",
        "geoanalyze stress sentence-transformers/all-MiniLM-L6-v2 \\\n"
        "    --dataset sample_corpora/drift-words.txt --fail-above scaled=0.5",
    ),
    "report": ("geoanalyze report rope:d=64 sinusoidal \\\n    --dataset sample_corpora/drift-words.txt -o report.md",),
    "marginals": ("geoanalyze marginals --dataset sample_corpora/drift.txt -t whitespace",),
    "distances": ("geoanalyze distances --dataset sample_corpora/drift.txt -t whitespace \\\n    --plot-dir figures",),
    "mds": ("geoanalyze mds --dataset sample_corpora/drift.txt -t whitespace \\\n    --rank 2 --width 64",),
    "train": ("geoanalyze train --preset smoke --pe rope --output-dir runs/order-rope",),
    "track": ("geoanalyze track runs/order-rope --dataset synthetic:drift -t whitespace",),
    "verify": (
        "geoanalyze verify list",
        "geoanalyze verify necessity --preset smoke --output-dir results/necessity",
    ),
    "datasets": ("geoanalyze datasets list",),
    "datasets list": ("geoanalyze datasets list --data-dir ../shared/data",),
    "datasets synthesize": ("geoanalyze datasets synthesize drift --n 200 --output-dir corpora",),
    "encodings": ("geoanalyze encodings list",),
    "encodings list": ("geoanalyze encodings list -f json",),
}


def command_words(command_path: str) -> str:
    """``geoanalyze datasets list`` -> ``datasets list`` (the key of :data:`EXAMPLES`)."""
    return " ".join(command_path.split()[1:])


def epilog(command_path: str) -> str | None:
    """The --help epilog of the command at ``command_path``: its examples, one paragraph each."""
    examples = EXAMPLES.get(command_words(command_path))
    if not examples:
        return None
    title = "Example:" if len(examples) == 1 else "Examples:"
    return "\n\n".join([title, *(f"  {example}" for example in examples)])
