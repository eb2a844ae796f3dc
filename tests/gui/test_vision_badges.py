"""A model that can see images says so, as LM Studio marks them: "vision" in the model picker,
the Library's Vision column (with the projector named) and the status bar once loaded, and
"sees images" in Loaded models. It sees when a projector was chosen for it, or one beside it
fits it (found off the GUI thread: GGUF headers)."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.load import ModelDefaults
from inglenook.ui.models.library import COLUMNS
from tests.gui.conftest import Script, fake_worker, open_window
from tests.gui.test_open_vision_model import model
from tests.mmproj_tools import write_mmproj

TIMEOUT_MS = 10_000


def test_models_that_see_images_say_so_everywhere_they_are_listed(
        qtbot: QtBot, script: Script, tmp_path: Path) -> None:
    folder = paths.models_dir()
    seeing = model(folder / "gemma-3-4b-it-Q4_K_M.gguf")
    projector = write_mmproj(folder / "gemma-3-4b-it-mmproj-f16.gguf", 576)
    write_mmproj(folder / "mmproj-llava-big-f16.gguf", 4096)  # another model's: not this one's
    blind = model(folder / "qwen-text-Q4_K_M.gguf")
    chosen = model(folder / "mine" / "my-vlm-Q8_0.gguf")
    elsewhere = write_mmproj(tmp_path / "my-projector.gguf", 576)
    script.write(vision=16)  # the fake engine's model sees images
    window = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"))
    window.app_settings.set_model_defaults(str(chosen),
                                           ModelDefaults({"mmproj_path": str(elsewhere)}))
    window.models.refresh()
    picker = window.picker
    qtbot.waitUntil(lambda: set(picker.entries_seeing()) == {str(seeing), str(chosen)},
                    timeout=TIMEOUT_MS)
    label = picker.itemText(picker.findData(str(seeing)))
    assert label.endswith("  ·  vision") and "vision" not in picker.itemText(
        picker.findData(str(blind)))

    window.models.show_dialog()
    library = window.models._dialog.library  # type: ignore[union-attr]
    vision = COLUMNS.index("Vision")
    rows = {library.table.topLevelItem(i).text(0): library.table.topLevelItem(i)  # type: ignore[union-attr]
            for i in range(library.table.topLevelItemCount())}
    qtbot.waitUntil(lambda: not library.reading and rows["qwen-text-Q4_K_M"].text(vision) == "No",
                    timeout=TIMEOUT_MS)
    assert rows["gemma-3-4b-it-Q4_K_M"].text(vision) == "Yes"
    assert str(projector) in rows["gemma-3-4b-it-Q4_K_M"].toolTip(vision)
    assert rows["my-vlm-Q8_0"].text(vision) == "Yes"
    library.select(str(seeing))
    assert "sees images (gemma-3-4b-it-mmproj-f16.gguf)" in library.detail_facts.text()
    window.models._dialog.close()  # type: ignore[union-attr]

    assert window.model_label.text().endswith("  ·  vision")  # the loaded model
    assert "Sees images with fake-mmproj-16.gguf: a 512 × 512 image takes 16 tokens" in \
        window.model_label.toolTip()
    window.loaded.show_dialog()
    dialog = window.loaded._dialog
    assert dialog is not None and " · sees images · " in dialog._facts[0].text()
    dialog.close()
    window.close()
