"""Knowledge in the window: the collections and their indexing (knowledge_controller.py), the
Knowledge dialog (knowledge_dialog.py), the chat's picker in the side panel (ui/side) and the
sources under a reply (ui/chat/source_chips.py)."""
