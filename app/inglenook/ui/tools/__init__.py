"""Tools through MCP in the window: the servers (tool_controller.py), the calls in the chats
(chat_tools.py), their cards (card_view.py) and the Tools dialog (tools_dialog.py)."""
