"""wmrl: World Model RL for AutoResearch agents and VLA policies.

Importing ``wmrl`` is cheap: it pulls in neither transformers, vllm nor lerobot.
"""

__version__ = "0.1.0"
