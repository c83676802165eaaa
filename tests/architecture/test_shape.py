"""The shape of the package, held by tests: the rules of docs/architecture.md.

The layers themselves are held by import-linter (``lint-imports``, the contract in pyproject.toml,
run by .ci/run); this file holds what a layers contract cannot say.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "geoanalyze"
MAX_FUNCTION_LINES = 80
#: functions allowed over MAX_FUNCTION_LINES, each with the reason (docs/architecture.md)
LONG_FUNCTIONS: dict[str, str] = {}


def modules(package: Path = PACKAGE) -> list[tuple[str, Path, ast.Module]]:
    """``(dotted name, path, syntax tree)`` of each module of ``package``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((name, path, ast.parse(path.read_text(encoding="utf-8"))))
    return found


def imported_module(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def test_no_module_imports_a_private_name_of_another() -> None:
    offences = []
    for name, path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = imported_module(name, path, node)
                if not source.startswith("geoanalyze") or source == name:
                    continue
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        offences.append(f"{name} imports {alias.name} from {source}")
    assert offences == []


def test_no_private_machinery_of_transformers_or_typer() -> None:
    pattern = re.compile(r"_global_mapping|typer\._click")
    offences = [str(path) for _, path, _ in modules() if pattern.search(path.read_text(encoding="utf-8"))]
    assert offences == []


def test_one_training_loop() -> None:
    steps = sum(path.read_text(encoding="utf-8").count("optimizer.step()") for _, path, _ in modules())
    assert steps == 1


def test_no_function_over_80_lines() -> None:
    long = []
    for name, _, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                qualified = f"{name}.{node.name}"
                if lines > MAX_FUNCTION_LINES and qualified not in LONG_FUNCTIONS:
                    long.append(f"{qualified}: {lines} lines")
    assert long == []


@pytest.mark.parametrize("reason", LONG_FUNCTIONS.values() or ["(none)"])
def test_every_long_function_says_why(reason: str) -> None:
    assert reason.strip()


def test_the_architecture_page_recipe_for_an_encoding_works() -> None:
    """The @encoding example of docs/architecture.md registers a family that specs then name."""
    import numpy as np

    from geoanalyze.encodings import REGISTRY, Parameter, encoding, get_encoding, spec_width

    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    example = re.search(r"```python\n(@encoding\(\n    \"cosine\".*?)```", page, re.S)
    assert example is not None
    body = example.group(1).rstrip() + '\n    k = np.arange(d)\n    return np.cos(np.outer(positions, base ** (-2 * k / d)))\n'
    try:
        exec(body, {"encoding": encoding, "Parameter": Parameter, "np": np})
        table = get_encoding("cosine:d=8").vectors(np.arange(5), None)  # type: ignore[arg-type]
        assert table.shape == (5, 8) and spec_width("cosine:d=8") == 8
        np.testing.assert_allclose(table[0], 1.0)
    finally:
        REGISTRY.families.pop("cosine", None)


def test_the_architecture_page_stress_command_runs(tmp_path: Path) -> None:
    """The command whose data flow docs/architecture.md follows runs as written (from the repository)."""
    import shlex

    from helpers import geoanalyze, ok

    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    line = next(line for line in page.splitlines() if line.startswith("geoanalyze stress "))
    run = ok(geoanalyze(*shlex.split(line)[1:], cwd=PACKAGE.parent))
    assert "sinusoidal" in run.stdout and "layer" in run.stdout.lower()
