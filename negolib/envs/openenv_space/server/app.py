"""OpenEnv's ``server.app:app``: the negotiation server of the game ``NEGOBOOK_GAME`` names (default
``multi_issue``), as ``python -m negolib serve`` builds it (:func:`negolib.envs.openenv_server.make_app`); ``main``
serves it (``NEGOBOOK_HOST``, default loopback; ``NEGOBOOK_PORT``, default 8000). The app is built on import, as
OpenEnv's layout expects of ``server.app``."""

from __future__ import annotations

import os

from negolib.envs.openenv_server import make_app, serve

app = make_app(os.environ.get("NEGOBOOK_GAME", "multi_issue"))


def main() -> None:
    """Serve the app's game until interrupted."""
    serve(os.environ.get("NEGOBOOK_GAME", "multi_issue"), host=os.environ.get("NEGOBOOK_HOST", "127.0.0.1"),
          port=int(os.environ.get("NEGOBOOK_PORT", "8000")))


if __name__ == "__main__":
    main()
