"""Gates that measure structure (issue 33, point 5): each reads the package's syntax trees, never imports it.

Every gate is a function of a package folder, so that each has a test which plants a violation in a
small tree under ``tmp_path`` and sees the gate report it. The gates:

- no module cycles, counting imports at any depth (in functions too, relative imports resolved);
- ``geoanalyze/cli`` imports only the public face of the library;
- no private attribute of a third-party object, but for the allowlisted ones, each with its reason;
- no function outside ``geoanalyze/cli`` with more than 8 parameters (``self``/``cls`` not counted).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_shape import PACKAGE, imported_module, modules

MAX_PARAMETERS = 8

#: what geoanalyze/cli may import from the library: the public face (and cli's own modules)
CLI_PUBLIC_FACE = ("geoanalyze", "geoanalyze.api", "geoanalyze.results", "geoanalyze.io", "geoanalyze.errors",
                   "geoanalyze.progress", "geoanalyze.notes")
CLI_PUBLIC_PACKAGES = ("geoanalyze.report", "geoanalyze.cli")

#: private attributes of objects that are not ours, each used on purpose: the reason it is needed
THIRD_PARTY_PRIVATES: dict[str, str] = {
    "_attn_implementation": "transformers (5.x) has no public getter of a loaded model's attention implementation; "
    "capture and hidden read the config's private property, as transformers itself does, to restore it",
    "_exit": "os._exit is the documented way to stop at once from a signal handler before main() runs "
    "(cli/app.py), without unwinding into half-imported modules",
}


# --- the package as syntax trees ---------------------------------------------------------------


def import_graph(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` and the modules of the same package it imports, at any depth.

    ``from a import b`` counts as importing the module ``a.b`` where there is one, else ``a``;
    an import of a name inside a module counts as importing the deepest module it names.
    """
    trees = {name: (path, tree) for name, path, tree in modules(package)}
    graph: dict[str, set[str]] = {name: set() for name in trees}
    for name, (path, tree) in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = imported_module(name, path, node)
                targets = [f"{source}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in trees:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def module_cycles(package: Path) -> list[str]:
    """Each import cycle of ``package``, as ``a <-> b <-> ...``."""
    return [" <-> ".join(component) for component in cycles(import_graph(package))]


def cli_imports_beyond_the_public_face(package: Path) -> list[str]:
    """``importer -> imported`` for each library module ``package/cli`` imports outside the public face."""
    root = package.name
    face = {module.replace("geoanalyze", root, 1) for module in CLI_PUBLIC_FACE}
    packages = tuple(module.replace("geoanalyze", root, 1) for module in CLI_PUBLIC_PACKAGES)
    offences = set()
    for importer, imported in import_graph(package).items():
        if not importer.startswith(f"{root}.cli"):
            continue
        for module in imported:
            if module not in face and not any(module == p or module.startswith(f"{p}.") for p in packages):
                offences.add(f"{importer} -> {module}")
    return sorted(offences)


def private_attributes(tree: ast.Module, root: str) -> Iterator[tuple[str, int]]:
    """``(name, line)`` of each ``x._name`` and ``getattr(x, "_name")`` (also has/set/delattr), and of each
    private module or name imported from another distribution (``from torch._dynamo import x``)."""
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for dotted in [f"{module}.{a.name}" for a in node.names] if module else [a.name for a in node.names]:
                parts = dotted.split(".")
                if parts[0] != root and any(p.startswith("_") and not p.startswith("__") for p in parts):
                    yield dotted, node.lineno
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in {"getattr", "hasattr", "setattr", "delattr"} and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            name = node.args[1].value
        if name and name.startswith("_") and not name.startswith("__"):
            yield name, node.lineno


def own_private_names(trees: list[ast.Module]) -> set[str]:
    """The private names the package itself defines: functions, classes, class and module names, and
    the attributes a method sets on ``self``/``cls``. An attribute set on another object (``config._x = ...``)
    does not make the name ours."""
    own: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.alias) and node.asname:
                own.add(node.asname)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}):
                own.add(node.attr)
    return {name for name in own if name.startswith("_") and not name.startswith("__")}


def third_party_private_attributes(package: Path) -> dict[str, list[str]]:
    """Each private attribute the package reads off an object that is not its own, with where."""
    found = modules(package)
    own = own_private_names([tree for _, _, tree in found])
    used: dict[str, list[str]] = {}
    for name, _, tree in found:
        for attribute, line in private_attributes(tree, package.name):
            if attribute not in own:
                used.setdefault(attribute, []).append(f"{name}:{line}")
    return used


def private_attribute_offences(package: Path, allowed: dict[str, str]) -> list[str]:
    """The unlisted third-party private attributes, and the allowlisted ones no longer used (stale)."""
    used = third_party_private_attributes(package)
    offences = [f"{attribute} at {', '.join(places)}" for attribute, places in sorted(used.items())
                if attribute not in allowed]
    offences += [f"{attribute}: allowlisted but no longer used" for attribute in sorted(allowed) if attribute not in used]
    return offences


def parameter_count(function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> int:
    """The parameters of ``function`` (``*args``/``**kwargs`` count one each), less a method's ``self``/``cls``."""
    arguments = function.args
    names = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
    count = len(names) + (arguments.vararg is not None) + (arguments.kwarg is not None)
    return count - (method and bool(names) and names[0] in {"self", "cls"})


def functions_with_many_parameters(package: Path, limit: int = MAX_PARAMETERS) -> list[str]:
    """``module.function: n`` for each function outside ``package/cli`` with more than ``limit`` parameters."""
    long = []
    for name, _, tree in modules(package):
        if name == f"{package.name}.cli" or name.startswith(f"{package.name}.cli."):
            continue
        methods = {id(item) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for item in node.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                count = parameter_count(node, id(node) in methods)
                if count > limit:
                    long.append(f"{name}.{node.name}: {count}")
    return sorted(long)


# --- the gates on geoanalyze ---------------------------------------------------------------------


def test_no_module_cycles() -> None:
    assert module_cycles(PACKAGE) == []


def test_cli_imports_only_the_public_face() -> None:
    assert cli_imports_beyond_the_public_face(PACKAGE) == []


def test_no_unlisted_third_party_private_attribute() -> None:
    assert private_attribute_offences(PACKAGE, THIRD_PARTY_PRIVATES) == []


@pytest.mark.parametrize("attribute", sorted(THIRD_PARTY_PRIVATES) or ["(none)"])
def test_every_allowed_private_attribute_says_why(attribute: str) -> None:
    assert THIRD_PARTY_PRIVATES.get(attribute, "(none)").strip()


def test_no_function_outside_the_cli_with_more_than_8_parameters() -> None:
    assert functions_with_many_parameters(PACKAGE) == []


# --- each gate sees a planted violation ----------------------------------------------------------


def plant(root: Path, files: dict[str, str]) -> Path:
    """A package ``geoanalyze`` under ``root`` holding ``files`` (path: source); returns its folder."""
    package = root / "geoanalyze"
    for relative, source in {"__init__.py": "", **files}.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return package


def test_a_cycle_through_an_in_function_relative_import_is_found(tmp_path: Path) -> None:
    package = plant(tmp_path, {
        "corpus/a.py": "from geoanalyze.corpus import b\n",
        "corpus/b.py": "def f():\n    if True:\n        from .a import g\n",
        "corpus/c.py": "from . import a\n",
    })
    assert module_cycles(package) == ["geoanalyze.corpus.a <-> geoanalyze.corpus.b"]
    (package / "corpus/b.py").write_text("def f():\n    from ..geometry import g\n", encoding="utf-8")
    assert module_cycles(package) == []


def test_a_cli_import_beyond_the_public_face_is_found(tmp_path: Path) -> None:
    package = plant(tmp_path, {
        "cli/app.py": """\
            from geoanalyze import api, results
            from geoanalyze.report.render import page
            from ..io import write
            from . import common
            def run():
                from geoanalyze.geometry import scores
                import geoanalyze.corpus.streaming
            """,
        "cli/common.py": "from geoanalyze.errors import Failure\n",
        "api.py": "", "results.py": "", "io.py": "", "errors.py": "", "report/render.py": "",
        "geometry/scores.py": "", "corpus/streaming.py": "",
    })
    assert cli_imports_beyond_the_public_face(package) == [
        "geoanalyze.cli.app -> geoanalyze.corpus.streaming", "geoanalyze.cli.app -> geoanalyze.geometry.scores"]


def test_a_third_party_private_attribute_is_found_and_a_stale_allowance_too(tmp_path: Path) -> None:
    package = plant(tmp_path, {
        "ours.py": """\
            _TABLE = {}
            def _helper(): ...
            class Box:
                _slots = 1
                def __init__(self):
                    self._value = 1
                def _method(self):
                    return self._value + Box._slots + _TABLE.get(0, 0)
            def use(box, module, config, pool):
                config._attn_implementation = "eager"
                box._method(); module._helper()
                return getattr(pool, "_processes"), config._attn_implementation
            from torch._dynamo import config
            from geoanalyze._private import thing
            from __future__ import annotations
            """,
    })
    used = third_party_private_attributes(package)
    assert sorted(used) == ["_attn_implementation", "_processes", "torch._dynamo.config"]
    assert used["_attn_implementation"] == ["geoanalyze.ours:10", "geoanalyze.ours:12"]
    allowed = {"_attn_implementation": "transformers' switch", "_gone": "no longer used"}
    assert private_attribute_offences(package, allowed) == [
        "_processes at geoanalyze.ours:12", "torch._dynamo.config at geoanalyze.ours:13", "_gone: allowlisted but no longer used"]


def test_a_function_with_nine_parameters_is_found_outside_the_cli_only(tmp_path: Path) -> None:
    nine = "(a, b, c, d, e, f, g, h, i): ..."
    package = plant(tmp_path, {
        "models/many.py": f"""\
            def many{nine}
            def eight(a, b, c, d, e, f, g, *rest): ...
            def star(a, b, c, d, e, f, g, *rest, **options): ...
            class Layer:
                def __init__(self, a, b, c, d, e, f, g, h): ...
                def method(self, a, b, c, d, e, f, g, *, h, i): ...
            """,
        "cli/app.py": f"def command{nine}\n",
    })
    assert functions_with_many_parameters(package) == [
        "geoanalyze.models.many.many: 9", "geoanalyze.models.many.method: 9", "geoanalyze.models.many.star: 9"]
