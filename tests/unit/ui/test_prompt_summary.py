"""The prompt inspector's summary counts an image's positions apart from the template's
control tokens (both are highlighted, only the markup is the template's)."""

from __future__ import annotations

from inglenook.engine.protocol import PromptToken, PromptView
from inglenook.ui.chat.prompt_dialog import summary


def test_image_positions_are_not_counted_as_control_tokens() -> None:
    tokens = (PromptToken(1, "<|im_start|>", True), PromptToken(-5, "[image 1: 3 tokens]", True),
              PromptToken(-6, "", True), PromptToken(-7, "", True), PromptToken(9, "Hi", False))
    text = summary(PromptView(1, "", tokens, n_ctx=512, image_positions=3))
    assert text.startswith("5 tokens of a 512-token context; 1 are control tokens")
    assert text.endswith(", 3 are image positions.")
    plain = summary(PromptView(1, "", tokens[:1] + tokens[-1:], n_ctx=512))
    assert plain.endswith("(highlighted).")
