"""Qt-free value types and logic shared by the engine, the command line and the window."""
