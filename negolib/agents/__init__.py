"""Agents: every party (scripted, local model, vLLM, API) speaks the same prose + JSON protocol."""

from negolib.agents.base import Agent, AgentReply

__all__ = ["Agent", "AgentReply"]
