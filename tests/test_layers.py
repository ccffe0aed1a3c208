"""Layers import downward only (DESIGN §2, docs/ARCHITECTURE.md "Layers").

Every ``import`` in ``ndgrad/``, at module level or inside a function, must name a module of its
own layer or a lower one. ``LAYERS`` below is the one layer map; the diagram in ARCHITECTURE.md
draws it.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "ndgrad"

# Module -> layer. A module takes the entry of its longest dotted prefix (a package's __init__ is
# the package's name); the bare "ndgrad" entry is the top-level __init__ only, so a new module
# must be placed here before the test passes.
LAYERS = {
    # 1 backend
    "ndgrad._backend": 1, "ndgrad._dtype": 1,
    # 2 autograd core: nodes, hooks, saved tensors, grad mode, dispatch-mode stacks
    "ndgrad.autograd.node": 2, "ndgrad.autograd.saved": 2, "ndgrad.autograd.grad_mode": 2,
    "ndgrad.autograd.dispatch_mode": 2,
    # 3 tensor
    "ndgrad._tensor": 3, "ndgrad._factories": 3, "ndgrad._tensor_str": 3, "ndgrad._random": 3,
    # 4 ops, and the named-tuple types of their results
    "ndgrad._ops": 4, "ndgrad.return_types": 4,
    # 5 engine and friends: the rest of ndgrad.autograd (engine, api, function, forward_ad,
    # functional, anomaly_mode, gradcheck, profiler, graph: the public facade; its __init__)
    "ndgrad.autograd": 5, "ndgrad.profiler": 5,
    # 6 libraries, and the top-level package that gathers everything
    "ndgrad.nn": 6, "ndgrad.optim": 6, "ndgrad.utils": 6, "ndgrad.cuda": 6, "ndgrad.ops": 6,
    "ndgrad.linalg": 6, "ndgrad.special": 6, "ndgrad.fft": 6, "ndgrad.serialization": 6,
    "ndgrad._serialization_legacy": 6, "ndgrad._legacy_types": 6,
    "ndgrad.compiler": 6, "ndgrad.fx": 6, "ndgrad._dynamo": 6, "ndgrad._logging": 6,
    "ndgrad._functorch": 6, "ndgrad.futures": 6, "ndgrad.distributed": 6,
    "ndgrad.multiprocessing": 6, "ndgrad.func": 6, "ndgrad.distributions": 6,
    "ndgrad.testing": 6, "ndgrad.accelerator": 6, "ndgrad.amp": 6, "ndgrad.cpu": 6,
    "ndgrad.backends": 6, "ndgrad._config": 6, "ndgrad.jit": 6,
    "ndgrad": 6,
}
ROOT = "ndgrad"


def layer_of(module: str):
    name = module
    while name not in LAYERS and "." in name:
        name = name.rpartition(".")[0]
    if name == ROOT and module != ROOT:
        return None  # unmapped
    return LAYERS.get(name)


def _modules(pkg: Path) -> dict:
    """Dotted module name -> file, for every .py under ``pkg``."""
    out = {}
    for path in sorted(pkg.rglob("*.py")):
        parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(module: str, path: Path, modules: dict):
    """(line, imported module) for every import of an ndgrad module in the file, at any depth."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = base + "." + node.module if node.module else base
            else:
                base = node.module
            for alias in node.names:
                sub = base + "." + alias.name
                # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module
                yield node.lineno, sub if sub in modules else base


def violations(pkg: Path = PKG) -> list:
    """Every import of a higher layer (and every unmapped module), as readable lines."""
    modules = _modules(pkg)
    out = []
    for module, path in modules.items():
        layer = layer_of(module)
        if layer is None:
            out.append(f"{module}: not in LAYERS (tests/test_layers.py)")
            continue
        for line, target in sorted(set(_targets(module, path, modules))):
            if target != ROOT and not target.startswith(ROOT + "."):
                continue
            tl = layer_of(target)
            if tl is None or tl > layer:
                out.append(f"{path.relative_to(pkg.parent)}:{line}: {module} (layer {layer}) "
                           f"imports {target} (layer {tl})")
    return out


def test_imports_go_downward():
    bad = violations()
    assert not bad, "imports from a higher layer:\n" + "\n".join(bad)


def test_checker_flags_an_upward_import(tmp_path):
    """The same tree plus one ops-layer module that imports the engine inside a function."""
    copy = tmp_path / "ndgrad"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_ops" / "_synthetic.py").write_text(
        "from ..autograd import grad_mode  # layer 2: fine\n"
        "\n"
        "def run():\n"
        "    from ..autograd.engine import run_backward  # layer 5: upward\n"
    )
    added = set(violations(copy)) - set(violations())
    assert added == {"ndgrad/_ops/_synthetic.py:4: ndgrad._ops._synthetic (layer 4) imports "
                     "ndgrad.autograd.engine (layer 5)"}
