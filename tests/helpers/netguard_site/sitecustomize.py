"""Installs tests/helpers/netguard.py's guard in every Python process started with this folder
on PYTHONPATH and INGLENOOK_NET_GUARD_LOG set (the engine host of the offline proof)."""

import importlib.util
import os
from pathlib import Path

_log = os.environ.get("INGLENOOK_NET_GUARD_LOG")
if _log:
    # By path: the child's sys.path has app/, not the repository root with tests/.
    _spec = importlib.util.spec_from_file_location(
        "inglenook_netguard", Path(__file__).resolve().parents[1] / "netguard.py")
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    _module.install(Path(_log))
