"""Test helpers: a fake engine host speaking the real protocol."""
