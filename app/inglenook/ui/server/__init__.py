"""The local API server, switched on and watched from the window."""
