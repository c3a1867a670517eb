"""Start-up: the CLI and the packages import no heavy library until a command needs it, and numba's
kernel cache goes to the per-user cache folder keyed by versions. Checked on ``sys.modules`` of a
fresh interpreter, never on a timing."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

HEAVY = ("numba", "polars", "numpy", "scipy", "implicit", "matplotlib", "pandas")  # typer imports pydantic
LAZY_PACKAGES = ("recsys_eval", "recsys_eval.core", "recsys_eval.data", "recsys_eval.targets",
                 "recsys_eval.recommend", "recsys_eval.measure", "recsys_eval.compare",
                 "recsys_eval.report")
OWN_COMMANDS = ("experiment", "datasets", "report", "split")


def _fresh(code: str, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` in a new interpreter; it leaves its answer in ``out`` (printed as JSON)."""
    script = f"import json, sys\nout = {{}}\n{code}\nprint(json.dumps(out))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          env={**os.environ, **(env or {})})
    return json.loads(done.stdout.strip().splitlines()[-1])


def _heavy_after(code: str) -> list[str]:
    answer = _fresh(code + f"\nout['heavy'] = [m for m in {HEAVY!r} if m in sys.modules]")
    return answer["heavy"]


def test_packages_import_no_heavy_library():
    assert _heavy_after("\n".join(f"import {p}" for p in LAZY_PACKAGES)) == []


def test_own_command_modules_import_no_heavy_library():
    imports = "\n".join(f"import recsys_eval.cli.{m}" for m in OWN_COMMANDS)
    assert _heavy_after(imports) == []


def test_help_of_own_commands_imports_no_heavy_library():
    code = "\n".join([
        *(f"import recsys_eval.cli.{m}" for m in OWN_COMMANDS),
        "from recsys_eval.cli import app",
        "for args in (['--help'], ['run', '--help'], ['datasets', '--help'], ['split', '--help']):",
        "    try:",
        "        app(args=args, prog_name='recsys-eval')",
        "    except SystemExit:",
        "        pass",
    ])
    assert _heavy_after(code) == []


def test_whole_cli_help_imports_no_heavy_library():
    code = "from recsys_eval.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert _heavy_after(code) == []


def test_python_dash_m_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "recsys_eval.cli", "--version"], capture_output=True,
                          text=True, check=True)
    assert done.stdout.startswith("recsys-eval ")


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_lazy_export_resolves_to_its_object(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert not (hasattr(value, "__path__") or type(value).__name__ == "module"), name
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        module.not_a_name  # noqa: B018


def test_lazy_export_is_the_defining_module_object():
    from recsys_eval.measure import measure
    from recsys_eval.measure.api import measure as defined

    assert measure is defined


KERNEL_RUN = """
import json, sys
import recsys_eval
from numba.core import event
compiled = []
class Count(event.Listener):
    def on_start(self, ev):
        func = ev.data["dispatcher"].py_func
        if func.__module__.startswith("recsys_eval"):
            compiled.append(func.__name__)
    def on_end(self, ev): pass
event.register("numba:compile", Count())
import numpy as np
from recsys_eval.split.order import _group_order
_group_order(np.array([1, 0, 1]), 2)
print(json.dumps([recsys_eval.__file__, compiled]))
"""


def _kernel_run(package_parent: Path, cache_home: Path) -> tuple[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(XDG_CACHE_HOME=str(cache_home), PYTHONPATH=str(package_parent))
    done = subprocess.run([sys.executable, "-c", KERNEL_RUN], capture_output=True, text=True, check=True,
                          env=env, cwd=package_parent)
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def test_kernels_compile_once_per_machine_not_per_clone(tmp_path):
    """Two copies of the package (two clones) share one kernel cache in the user cache folder,
    under a key of the versions and the sources; the second copy compiles nothing, and a copy
    whose sources differ anywhere (a kernel's callee in another module) has a cache of its own."""
    import numba

    import recsys_eval
    from recsys_eval.core.kernel_cache import USED_STAMP, source_digest

    source = Path(recsys_eval.__file__).parent
    clones = []
    for name in ("clone1", "clone2"):
        shutil.copytree(source, tmp_path / name / "recsys_eval", ignore=shutil.ignore_patterns("__pycache__"))
        clones.append(tmp_path / name)
    first_file, first = _kernel_run(clones[0], tmp_path / "cache")
    second_file, second = _kernel_run(clones[1], tmp_path / "cache")
    assert first_file.startswith(str(clones[0])) and second_file.startswith(str(clones[1]))
    assert first == ["_group_order"] and second == []
    key = f"{recsys_eval.__version__}-{source_digest()}-{numba.__version__}-{sys.implementation.cache_tag}"
    assert list((tmp_path / "cache" / "recsys-eval" / "numba" / key / "split").glob("order._group_order-*.nbi"))
    changed = tmp_path / "clone1" / "recsys_eval" / "core" / "chunks.py"  # not the kernel's own module
    changed.write_text(changed.read_text() + "\n# changed\n")
    assert _kernel_run(clones[0], tmp_path / "cache")[1] == ["_group_order"]
    # the first sources' cache, in use, is kept beside the new one; unused for a month, it is
    # removed when another new folder starts
    folders = tmp_path / "cache" / "recsys-eval" / "numba"
    assert (folders / key).is_dir() and len(list(folders.iterdir())) == 2
    month_ago = time.time() - 31 * 86400
    os.utime(folders / key / USED_STAMP, (month_ago, month_ago))
    changed.write_text(changed.read_text() + "\n# changed again\n")
    assert _kernel_run(clones[0], tmp_path / "cache")[1] == ["_group_order"]
    assert not (folders / key).exists() and len(list(folders.iterdir())) == 2


def test_numba_cache_dir_given_by_the_user_is_kept(tmp_path):
    answer = _fresh("import recsys_eval, numba.core.config as c\n"
                    "out['dir'], out['locators'] = c.CACHE_DIR, c.CACHE_LOCATOR_CLASSES",
                    env={"NUMBA_CACHE_DIR": str(tmp_path / "mine")})
    assert answer == {"dir": str(tmp_path / "mine"), "locators": ""}
