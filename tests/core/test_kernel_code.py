"""Kernels copy arrays with loops: an array assigned to a slice makes numba compile its shape-mismatch
message, ~20 variants of string formatting code (~2.4 s of a first run), in whichever kernel does it
first (recsys_eval.core.sorting says more). Checked on the source, so a cold compile is not needed."""

from __future__ import annotations

import ast
from pathlib import Path

import recsys_eval

PACKAGE = Path(recsys_eval.__file__).parent


def _is_kernel(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef) and any("njit" in ast.unparse(d) for d in node.decorator_list)


def _has_slice(index: ast.AST) -> bool:
    return any(isinstance(part, ast.Slice) for part in ast.walk(index))


def _array_valued(value: ast.AST) -> bool:
    """Surely an array: a slice of something, or something indexed by a call's result (an index
    array), alone or inside arithmetic. Names and calls may be scalars, so they are not flagged."""
    if isinstance(value, ast.Subscript):
        return _has_slice(value.slice) or isinstance(value.slice, ast.Call) or _array_valued(value.value)
    if isinstance(value, ast.BinOp):
        return _array_valued(value.left) or _array_valued(value.right)
    if isinstance(value, ast.UnaryOp):
        return _array_valued(value.operand)
    return False


def slice_copies(source: str) -> list[str]:
    """``name:line`` of every ``x[...:...] = <array>`` inside an ``@njit`` function of ``source``."""
    found = []
    for kernel in filter(_is_kernel, ast.walk(ast.parse(source))):
        for node in ast.walk(kernel):
            if isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Subscript) and _has_slice(t.slice) for t in targets) \
                        and _array_valued(node.value):
                    found.append(f"{kernel.name}:{node.lineno}")
    return found


def test_the_check_finds_array_slice_assignment_and_lets_scalar_fills_pass():
    source = (
        "@njit(cache=True)\n"
        "def k(a, tmp, order, n):\n"
        "    a[:n] = tmp[:n]\n"
        "    a[:] = a[stable_argsort(a)]\n"
        "    a[1:3] = -tmp[order][0:2]\n"
        "    a[:] = 0\n"
        "    a[:] = np.nan\n"
        "    a[:n] = n\n"
        "    a[0] = tmp[1]\n"
        "def not_a_kernel(a, b):\n"
        "    a[:] = b[:]\n"
    )
    assert slice_copies(source) == ["k:3", "k:4", "k:5"]


def test_no_kernel_assigns_an_array_to_a_slice():
    found = {
        str(path.relative_to(PACKAGE)): hits
        for path in sorted(PACKAGE.rglob("*.py"))
        if (hits := slice_copies(path.read_text()))
    }
    assert found == {}, f"copy these arrays with a loop instead: {found}"
