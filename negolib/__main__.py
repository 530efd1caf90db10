"""``python -m negolib``: see :mod:`negolib.cli`."""

from negolib.cli import main

raise SystemExit(main())
