"""Rollouts: the vLLM engine and the groups of responses a step grades."""
