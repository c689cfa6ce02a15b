"""``python -m judgegraph``: the same command line as ``judgegraph``."""

from judgegraph.cli import main

main()
