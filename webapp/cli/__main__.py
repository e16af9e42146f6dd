"""``python -m webapp.cli``: the ``steplab`` command."""

from webapp.cli import main

main()
