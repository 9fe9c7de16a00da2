"""The WMRL hooks as Lightning callbacks (importing this package never imports transformers/vllm/lerobot)."""

from wmrl.callbacks.base import RLCallback

__all__ = ["RLCallback"]
