"""OpenEnv's package layout for the negotiation server: ``openenv.yaml`` (the manifest), ``pyproject.toml`` (its
``server`` script), ``server/app.py`` (the app of the game ``NEGOBOOK_GAME`` names) and ``server/Dockerfile``.
The server itself is :mod:`negolib.envs.openenv_server`."""
