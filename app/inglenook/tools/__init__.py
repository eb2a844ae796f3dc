"""Tools through MCP, Qt-free.

  config.py      mcp.json (`mcpServers`): ServerConfig, load_config, save_config
  manager.py     ToolManager: the servers on their own asyncio thread; futures for results
  connection.py  one server's session (the manager's thread only)
  catalog.py     ToolInfo, ToolCatalog: model-facing names and the template's `tools` list
  formats.py     tool_format(template) and the messages that carry calls and results back
  parsing.py, parsers.py   tool calls found in streamed output, per format
  stream.py      ReplyStream: reasoning, answer text and tool calls from one reply
  approval.py    ChatToolPolicy: servers on in a chat, tools allowed without asking
  results.py     ToolResult: a call's status and the text the model gets
  cards.py       ToolCard: a call, its decision and result, as the transcript keeps it
"""
