"""Conversation history: sidebar, search, export and import."""
