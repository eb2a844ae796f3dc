"""Inglenook: a native desktop chat for running language models locally and privately."""

__version__ = "0.1.0"
