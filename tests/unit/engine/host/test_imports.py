"""The engine host process starts with what it needs: no HTTP client (it never talks to the
Hub; models/fit.py is imported for sizing, models/remote_header.py is not) and no Qt."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import inglenook

HOST_MODULES = ("inglenook.engine.host", "inglenook.engine.host.process",
                "inglenook.engine.host.loading")
NOT_IN_THE_HOST = ("httpx", "httpx2", "httpcore", "h11", "PySide6")


def test_importing_the_engine_host_imports_no_http_client_and_no_qt():
    app_dir = os.path.dirname(os.path.dirname(inglenook.__file__))
    code = ("import importlib, json, sys\n"
            f"for name in {HOST_MODULES!r}: importlib.import_module(name)\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([app_dir, *sys.path]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert loaded.isdisjoint(NOT_IN_THE_HOST), sorted(loaded & set(NOT_IN_THE_HOST))
