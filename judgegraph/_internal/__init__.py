"""Helpers every wing of judgegraph shares and no user imports.

``strict_json`` (JSON that refuses a key given twice), ``markers`` (score
markers and invisible characters in judge output) and ``text_files`` (a
user's files in whatever encoding their BOM says). They import nothing from
judgegraph (the bottom layer of the import contract in pyproject.toml), and,
being under a private package, only judgegraph's own modules may import them.
"""

__all__: list[str] = []  # nothing here is public; import the modules themselves
