from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.adapters import registry
from dispatch.model import ConfigError


def test_unknown_adapter_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known adapters: kubeflow, local, memory, slurm"):
        registry.factory("nomad")


def test_adapters_are_imported_lazily() -> None:
    # in a fresh interpreter: other tests (the emulator's) import Kubernetes clients
    import subprocess
    import sys

    probe = (
        "import sys, dispatch.adapters.registry; "
        "print('dispatch.adapters.kubeflow' in sys.modules, 'kubernetes_asyncio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_a_missing_client_library_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "fake_kubeflow_adapter.py").write_text("import no_such_client_library\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.ADAPTERS, "kubeflow", "fake_kubeflow_adapter:Adapter")
    with pytest.raises(ConfigError, match=r"no_such_client_library.*dispatch-train\[kubeflow\]"):
        registry.factory("kubeflow")


def test_an_adapter_not_in_this_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.ADAPTERS, "slurm", "dispatch.adapters.no_such_adapter:X")
    with pytest.raises(ConfigError, match="not available in this version"):
        registry.factory("slurm")
