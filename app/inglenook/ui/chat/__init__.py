"""The chat column: message view, Markdown rendering, composer."""
