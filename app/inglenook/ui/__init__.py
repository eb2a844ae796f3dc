"""Widgets only: the main window, chat view, composer, side panel and dialogs."""
