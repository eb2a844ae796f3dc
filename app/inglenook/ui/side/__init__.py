"""The side panel: presets, system prompt, sampling and load options."""
