"""The package reads like the pipeline: a stage imports only the stages below it (../shared/DESIGN.md
section 1), at module level or inside a function alike, so no subpackage ever imports another that
imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "recsys_eval"
#: Bottom to top; a subpackage may import its own layer's others (no cycle) and every layer below.
LAYERS = [
    ("core", "errors", "_lazy"),
    ("data", "split", "targets", "recommend"),
    ("measure",),
    ("compare",),
    ("report",),
    ("pipeline",),
    ("tune", "engine"),
    ("experiment",),
    ("cli", "__init__", "__main__"),
]
RANK = {name: level for level, names in enumerate(LAYERS) for name in names}


def _stage(module: str) -> str:
    """``recsys_eval.measure.api`` -> ``measure``; ``recsys_eval`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> list[tuple[str, str, str, int]]:
    """Every import of a recsys_eval module: (importing stage, imported stage, file, line)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        source = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "recsys_eval" or name.startswith("recsys_eval."):
                    found.append((source, _stage(name), str(relative), node.lineno))
    return found


def test_every_stage_has_a_layer():
    stages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    stages |= {p.stem for p in PACKAGE.glob("*.py")}
    assert stages <= set(RANK), f"place {sorted(stages - set(RANK))} in LAYERS"


def test_no_stage_imports_one_above_it():
    upward = [f"{file}:{line}: {source} imports {target}" for source, target, file, line in imports()
              if RANK[target] > RANK[source]]
    assert not upward, "imports that point up the pipeline:\n" + "\n".join(upward)


def test_no_import_cycle_between_subpackages():
    graph: dict[str, set[str]] = {}
    for source, target, _, _ in imports():
        if source != target:
            graph.setdefault(source, set()).add(target)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(s for s in graph if reaches(s, s, {s}))
    assert not cycles, f"subpackages in an import cycle: {cycles}"


@pytest.mark.parametrize("source, target", [("measure", "experiment"), ("recommend", "engine")])
def test_the_check_sees_an_upward_import(tmp_path, monkeypatch, source, target):
    """The checks fail on an upward import written inside a function (a guard against a check
    that cannot fail)."""
    fake = tmp_path / "recsys_eval"
    for path in PACKAGE.rglob("*.py"):
        copy = fake / path.relative_to(PACKAGE)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (fake / source / "_upward.py").write_text(f"def f():\n    from recsys_eval.{target} import x\n")
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    with pytest.raises(AssertionError, match=f"{source} imports {target}"):
        test_no_stage_imports_one_above_it()
