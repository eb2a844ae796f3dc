"""The inference engine: a child process that owns llama.cpp, and the clients that drive it."""
