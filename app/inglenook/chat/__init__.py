"""The conversation (Qt-free): sessions, their settings, replies as they stream and the tool
rounds they start. Above store/ and tools/, below engine/ and ui/."""
