"""A remote model and images in the window, against a fake OpenAI-compatible server on 127.0.0.1
that says nothing of what its models read (as vLLM or llama-server): the composer says at once
that the model cannot see; ticking the model in Remote engines… and saving chooses it again,
and the image then reaches the server as an image_url data: URL."""

from __future__ import annotations

import base64
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.engine.client import EngineClient
from inglenook.engine.providers import ProviderStore
from inglenook.engine.router import EngineRouter
from inglenook.engine.worker import EngineWorker
from inglenook.ui.chat.image_parts import CANNOT_SEE_REMOTE
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.providers_dialog import ProvidersDialog
from tests.gui.conftest import (
    LOAD_TIMEOUT_MS,
    Script,
    greedy_settings,
    open_window,
    wait_reply,
)
from tests.helpers import keyrings
from tests.helpers.keyrings import MemoryKeyring
from tests.helpers.vision_peer import REPLY, VisionPeer, vision_peer

pytestmark = pytest.mark.gui
memory_keyring = keyrings.memory_keyring
WAIT_MS = 20_000


@pytest.fixture
def window(qtbot: QtBot, script: Script, tmp_path: Path, memory_keyring: MemoryKeyring
           ) -> Iterator[tuple[MainWindow, VisionPeer]]:
    with vision_peer("generic", {"seeing-model": True, "text-model": False}) as peer:
        store = ProviderStore()
        provider = store.save("GPU box", peer.url)
        settings = greedy_settings()
        settings.last_model = provider.ref("seeing-model")
        local = EngineClient(log_path=tmp_path / "engine.log",
                             command=[sys.executable, "-m", "tests.helpers.fake_host",
                                      str(script.path)])
        win = open_window(qtbot, EngineWorker(EngineRouter(local, store)), settings)
        yield win, peer
        win.close()


def peer_ref(win: MainWindow, model: str) -> str:
    return ProviderStore().providers()[0].ref(model)


def test_a_remote_model_ticked_as_seeing_is_sent_the_image(
        qtbot: QtBot, window: tuple[MainWindow, VisionPeer], tmp_path: Path) -> None:
    win, peer = window
    composer = win.composer
    assert win.models.model is not None and not win.models.model.vision  # the server says nothing
    out = io.BytesIO()
    Image.new("RGB", (32, 24), (250, 200, 0)).save(out, "PNG")
    photo = tmp_path / "photo.png"
    photo.write_bytes(out.getvalue())
    composer.attach_files([str(photo)])
    qtbot.waitUntil(lambda: len(composer.attachments) == 1, timeout=WAIT_MS)
    assert composer.notice.isVisible() and CANNOT_SEE_REMOTE in composer.notice.text()
    # The picker marks the models the server or the user says read images: none yet.
    qtbot.waitUntil(lambda: win.picker.findData(peer_ref(win, "text-model")) >= 0,
                    timeout=WAIT_MS)
    assert not win.picker.entries_seeing()

    win.models.show_providers()
    dialog = win.findChild(ProvidersDialog)
    assert dialog is not None and dialog.vision_models.count() == 0  # nothing ticked yet
    with qtbot.waitSignal(dialog.tested, timeout=WAIT_MS):
        dialog.test_button.click()
    items = {dialog.vision_models.item(i).text(): dialog.vision_models.item(i)
             for i in range(dialog.vision_models.count())}
    assert set(items) == {"seeing-model", "text-model"}
    items["seeing-model"].setCheckState(Qt.CheckState.Checked)
    with qtbot.waitSignal(win.model_ready, timeout=LOAD_TIMEOUT_MS):
        dialog.save_button.click()  # the model in use is chosen again, now seeing
    assert ProviderStore().providers()[0].vision_models == ("seeing-model",)
    assert win.models.model is not None and win.models.model.vision
    assert not composer.notice.isVisible()
    qtbot.waitUntil(lambda: win.picker.entries_seeing() == [peer_ref(win, "seeing-model")],
                    timeout=WAIT_MS)
    with qtbot.assertNotEmitted(dialog.vision_marked):  # nothing ticked anew: no reload
        dialog.save_button.click()
    dialog.close()

    composer.edit.setPlainText("What is this?")
    with qtbot.waitSignal(win.reply_started):
        qtbot.keyClick(composer.edit, Qt.Key.Key_Return)
    wait_reply(qtbot, win)
    assert win.chat.bubbles[-1].text == REPLY
    expected = "data:image/png;base64," + base64.b64encode(photo.read_bytes()).decode()
    assert peer.image_urls() == [expected]
