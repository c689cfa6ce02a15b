"""Prebuilt evaluation graphs. Installed as ``judgegraph.graphs``."""
