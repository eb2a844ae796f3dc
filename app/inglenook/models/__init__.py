"""Models: GGUF metadata, the library of installed models, Hub search, downloads, fit planning."""
