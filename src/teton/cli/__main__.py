"""``python -m teton.cli``: the ``teton`` command (as ``python -m teton``)."""

from teton.cli import main

main()
