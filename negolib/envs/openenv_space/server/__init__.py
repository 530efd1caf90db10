"""The server entry of OpenEnv's layout (:mod:`negolib.envs.openenv_space.server.app`)."""
