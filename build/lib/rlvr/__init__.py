"""rlvr: reinforcement learning with verifiable rewards, as a DVC pipeline."""

__version__ = "0.1.0"
