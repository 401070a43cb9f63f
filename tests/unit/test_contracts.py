"""The architecture as tests (issue 27 §3), by walking every module's syntax tree.

- Only :mod:`honesteval.orchestration` and :mod:`honesteval.server` import Prefect, at any
  level (a function-level import counts: it is where the 51 hidden ones were).
- :mod:`honesteval.stats` imports only numpy, scipy, the standard library, the types
  (:mod:`honesteval.models`) and the errors: pure, no I/O framework, no Prefect.
- No import cycle among modules at module level (what runs when a module is imported;
  ``if TYPE_CHECKING:`` blocks do not run).
- The packages form layers (:data:`LAYERS`, as docs/architecture.md draws them): each
  subpackage or top-level module imports only from layers below its own, at module or
  function level. No circle between packages, counting every import, ``if TYPE_CHECKING:``
  ones too (a reader follows those as well): the adapters name what they read of a project
  with a protocol of their own (:mod:`honesteval.adapters.project_view`).
- No module patches FastAPI, Starlette, pydantic or Prefect (no assignment to an attribute
  or item of an object imported from them or bound to what calling one returns, no
  ``setattr`` or ``del`` on one) nor freezes the
  cyclic collector (``gc.freeze``): honesteval runs on their public surface, so any Prefect 3
  its users run.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "honesteval"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    is_package = MODULES[module].name == "__init__.py"
    base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """Every module an import statement loads (``from pkg import mod`` loads ``pkg.mod``)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    target = _absolute(module, node)
    yield target
    for alias in node.names:
        if f"{target}.{alias.name}" in MODULES:
            yield f"{target}.{alias.name}"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(module: str, body: list[ast.stmt]) -> Iterator[str]:
    """Imports that run when the module is imported (not in functions, not TYPE_CHECKING)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _imported(module, node)
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            yield from _module_level(module, node.body + node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [stmt for h in node.handlers for stmt in h.body]
            yield from _module_level(module, node.body + handlers + node.orelse + node.finalbody)
        elif isinstance(node, ast.With):
            yield from _module_level(module, node.body)


def _trees() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


TREES = _trees()


def _all_imports(module: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update(_imported(module, node))
    return found


def _top(name: str) -> str:
    return name.split(".")[0]


def test_the_walker_sees_function_level_and_relative_imports() -> None:
    """The walker itself: a known function-level Prefect import and a relative one."""
    assert "prefect.settings" in _all_imports("honesteval.server.localserver")
    assert "honesteval.stats._estimators" in _all_imports("honesteval.stats._aggregate")


def test_only_orchestration_and_server_import_prefect() -> None:
    allowed = ("honesteval.orchestration", "honesteval.server")
    offenders = {
        module: sorted(i for i in _all_imports(module) if _top(i) in {"prefect", "prefect_dask"})
        for module in MODULES
        if not module.startswith(allowed)
    }
    assert {m: found for m, found in offenders.items() if found} == {}


def test_stats_imports_only_numpy_scipy_the_types_and_the_errors() -> None:
    ours = {"honesteval.models", "honesteval.errors"}
    offenders = {}
    for module in (m for m in MODULES if m.startswith("honesteval.stats")):
        bad = sorted(
            i
            for i in _all_imports(module)
            if not (
                _top(i) in {"numpy", "scipy", "__future__"}
                or _top(i) in sys.stdlib_module_names
                or i in ours
                or i.startswith("honesteval.stats")
            )
        )
        if bad:
            offenders[module] = bad
    assert offenders == {}


def _graph() -> dict[str, set[str]]:
    """Module-level imports between honesteval modules. Importing ``a.b.c`` runs ``a`` and
    ``a.b`` first, so a module also depends on the packages above what it imports, except its
    own packages (a package's ``__init__`` re-exporting its submodules is no cycle: they are
    imported as part of it)."""
    graph: dict[str, set[str]] = {}
    for module, tree in TREES.items():
        parts_of_self = module.split(".")
        own = {".".join(parts_of_self[:n]) for n in range(1, len(parts_of_self))}
        edges: set[str] = set()
        for name in _module_level(module, tree.body):
            parts = name.split(".")
            above = {".".join(parts[:n]) for n in range(2, len(parts))} - own
            edges.update(m for m in {name, *above} if m in MODULES)
        edges.discard(module)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_at_module_level() -> None:
    assert _cycles(_graph()) == []


#: The packages from the bottom up (docs/architecture.md). A package imports only from layers
#: below its own; packages of one layer do not import each other. ``honesteval`` is the
#: package's own ``__init__``: the facade that imports the API on first use.
LAYERS: list[tuple[str, ...]] = [
    ("settings_help",),  # the help text of every request setting (plain strings)
    ("errors", "models"),  # the vocabulary: errors and the data types
    ("redaction", "interrupts", "retry"),  # rules every layer applies: secrets, stops, retries
    ("stats",),  # pure numpy/scipy
    ("store",),  # .honesteval/: atomic files, trial log, content fingerprints
    ("adapters",),  # target and scorer kinds with their configs; the Eve steps and judges
    ("project",),  # honesteval.yaml, tasks, frozen split, candidates
    ("evaluation",),  # plan, trial runner, local runner, progress, checks
    ("imports",),  # results run elsewhere (Inspect logs) stored as trials
    ("gating",),  # the gate: config, steps, ledger (best, decisions, seal, confirmations), power
    ("views",),  # text, HTML, plots, status, compare, export
    ("server",),  # the local Prefect server
    ("orchestration",),  # Prefect tasks and flows, flow runs, serving
    ("api",),  # evaluate, gate, rescore, finalize
    # entry points: the CLI, the flows' and tasks' public paths, the facade
    ("cli", "flows", "tasks", "honesteval"),
    ("launch",),  # the script: starts the reusable server before the CLI imports
]


def _package_of(module: str) -> str:
    """The layering's node: the subpackage or top-level module right under ``honesteval``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _runtime_imports(module: str) -> set[str]:
    """Every import that can run: at module level or in a function, not under TYPE_CHECKING."""
    found: set[str] = set()
    stack: list[ast.AST] = [TREES[module]]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update(_imported(module, node))
        stack.extend(ast.iter_child_nodes(node))
    return found


def _package_edges(
    imports: Callable[[str], set[str]] = _runtime_imports,
) -> dict[tuple[str, str], list[str]]:
    """(importer's package, imported package) -> the imports behind it (``imports``: those
    that can run, or all). ``from honesteval import interrupts`` is an import of
    ``interrupts``, not of the facade (every module runs the package's ``__init__`` first,
    whoever imports it)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module in MODULES:
        for name in imports(module):
            if name not in MODULES or name == "honesteval":
                continue
            edge = (_package_of(module), _package_of(name))
            if edge[0] != edge[1]:
                edges.setdefault(edge, []).append(f"{module} -> {name}")
    return edges


def test_the_layers_name_every_package_once() -> None:
    named = [p for layer in LAYERS for p in layer]
    assert sorted(named) == sorted({_package_of(m) for m in MODULES})


def test_the_package_walker_skips_type_checking_and_sees_function_level_imports() -> None:
    """A function-level import counts (the CLI's lazy ones), a TYPE_CHECKING one does not."""
    assert "honesteval.api" in _runtime_imports("honesteval.cli.evaluate")
    assert "honesteval.adapters.project_view" in _all_imports("honesteval.adapters._base")
    assert "honesteval.adapters.project_view" not in _runtime_imports("honesteval.adapters._base")


def _not_downward(
    edges: dict[tuple[str, str], list[str]], layers: list[tuple[str, ...]]
) -> dict[str, list[str]]:
    """The package edges that do not point to a lower layer, with the imports behind them."""
    layer = {p: i for i, names in enumerate(layers) for p in names}
    return {f"{a} -> {b}": sorted(why) for (a, b), why in edges.items() if layer[b] >= layer[a]}


def test_the_layer_check_finds_an_upward_and_a_sideways_import() -> None:
    layers = [("models",), ("store", "stats"), ("views",)]
    edges = {
        ("views", "store"): ["v -> s"],
        ("store", "views"): ["s -> v"],
        ("store", "stats"): ["s -> t"],
    }
    assert _not_downward(edges, layers) == {
        "store -> views": ["s -> v"],
        "store -> stats": ["s -> t"],
    }


def test_packages_import_only_from_lower_layers() -> None:
    assert _not_downward(_package_edges(), LAYERS) == {}


def test_no_import_circle_between_packages_type_checking_imports_included() -> None:
    """``project.schema`` builds on the adapters' configs while the adapters named
    ``project.loader.Project`` in annotations: one circle of 17 files. Any circle between
    packages fails here, whatever the layers say."""
    graph: dict[str, set[str]] = {_package_of(m): set() for m in MODULES}
    for a, b in _package_edges(_all_imports):
        graph[a].add(b)
    assert _cycles(graph) == []


def _package_graph(module_filter: str | None = None) -> dict[str, set[str]]:
    """Every import that can run (module or function level, not TYPE_CHECKING) between two
    modules of one package. Importing one's own package (its ``__init__``) is no edge: it has
    run before any of its modules."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        parts = module.split(".")
        own = {".".join(parts[:n]) for n in range(1, len(parts))}
        graph[module] = {
            name
            for name in _runtime_imports(module)
            if name in MODULES
            and name not in own
            and name != module
            and _package_of(name) == _package_of(module)
        }
    return graph


def test_no_import_cycles_inside_a_package_function_level_included() -> None:
    """``_base.build_adapter`` importing the kinds that import ``_base`` was one: the base
    imports no kind now (``adapters.assemble`` builds a project's adapter); ``localserver`` ↔
    ``sitting`` ↔ ``live_runs`` was another: what they share is ``server.server_process``."""
    assert _cycles(_package_graph()) == []


def _is_private(name: str) -> bool:
    """``_name``, not a dunder (``__version__`` is public)."""
    return name.startswith("_") and not name.endswith("__")


def _private_parts(name: str) -> list[str]:
    return [p for p in name.split(".")[1:] if _is_private(p)]


def _private_imports_across_packages() -> dict[str, list[str]]:
    """Modules (``pkg._mod``) and names (``from pkg.mod import _name``) private to a package,
    imported from another one."""
    found: dict[str, list[str]] = {}
    for module in MODULES:
        bad: set[str] = set()
        stack: list[ast.AST] = [TREES[module]]
        while stack:
            node = stack.pop()
            stack.extend(ast.iter_child_nodes(node))
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported(module, node):
                across = name in MODULES and _package_of(name) != _package_of(module)
                if across and _private_parts(name):
                    bad.add(name)
            if isinstance(node, ast.ImportFrom):
                target = _absolute(module, node)
                if target in MODULES and _package_of(target) != _package_of(module):
                    bad.update(
                        f"{target}.{a.name}"
                        for a in node.names
                        if _is_private(a.name) and f"{target}.{a.name}" not in MODULES
                    )
        if bad:
            found[module] = sorted(bad)
    return found


def test_the_private_check_sees_a_private_module_and_a_private_name() -> None:
    assert _private_parts("honesteval.adapters._process") == ["_process"]
    assert _private_parts("honesteval.adapters") == []
    assert not _is_private("__version__") and _is_private("_smallest")


def test_no_private_module_or_name_is_imported_across_packages() -> None:
    assert _private_imports_across_packages() == {}


#: The frameworks under Prefect's server, and Prefect itself: honesteval uses their public
#: surface and changes none of their parts.
FRAMEWORKS = frozenset({"fastapi", "starlette", "pydantic", "pydantic_core", "prefect"})


def _framework_names(tree: ast.Module) -> set[str]:
    """The names a module binds to something imported from :data:`FRAMEWORKS`, or to what
    calling one of those returns (``runner = Runner()``: an object of theirs)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(
                (a.asname or a.name).split(".")[0] for a in node.names if _top(a.name) in FRAMEWORKS
            )
        elif (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and _top(node.module or "") in FRAMEWORKS
        ):
            names.update(a.asname or a.name for a in node.names)
    made = [
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and _root(node.value.func) in names
        for target in node.targets
        if isinstance(target, ast.Name)
    ]
    return names | set(made)


def _root(node: ast.expr) -> str | None:
    """The name an attribute or item chain starts from (``a`` of ``a.b[c].d``)."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _patches(tree: ast.Module) -> list[str]:
    """Each assignment to (or ``del``, ``setattr``, ``delattr`` of) an attribute or item of an
    object imported from :data:`FRAMEWORKS`, and each ``gc.freeze``, as source text."""
    imported = _framework_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("setattr", "delattr"):
            targets = node.args[:1]
        if isinstance(node, ast.Attribute) and node.attr == "freeze" and _root(node) == "gc":
            found.append(ast.unparse(node))
        if isinstance(node, ast.ImportFrom) and node.module == "gc":
            found += [f"gc.{a.name}" for a in node.names if a.name == "freeze"]
        found += [
            ast.unparse(t)
            for t in targets
            if _root(t) in imported and (isinstance(node, ast.Call) or not isinstance(t, ast.Name))
        ]
    return found


def test_the_patch_check_finds_each_way_of_patching_a_framework() -> None:
    source = """
import gc
import prefect.settings
from fastapi.routing import APIRoute as Route
from pydantic._internal._config import config_defaults
from starlette import routing
from mine import thing
from prefect.runner import Runner
runner = Runner()
runner.handle_sigterm = None
Route.__init__ = None
config_defaults["defer_build"] = True
routing.Router.matches += 1
setattr(prefect.settings, "x", 1)
del routing.Match
gc.freeze()
thing.attribute = 1
copied = Route
local = 1
"""
    assert sorted(_patches(ast.parse(source))) == sorted(
        [
            "runner.handle_sigterm",
            "Route.__init__",
            "config_defaults['defer_build']",
            "routing.Router.matches",
            "prefect.settings",
            "routing.Match",
            "gc.freeze",
        ]
    )


def test_no_module_patches_fastapi_starlette_pydantic_or_prefect_nor_freezes_the_collector() -> (
    None
):
    found = {module: hits for module, tree in TREES.items() if (hits := _patches(tree))}
    assert found == {}
