"""Sandbox backends behind one interface. The docker backend is imported lazily (it needs the docker SDK)."""

from wmrl.autoresearch.environments.sandbox.base import (
    ExecutionRequest,
    ExecutionResult,
    Sandbox,
    SandboxLimits,
)
from wmrl.autoresearch.environments.sandbox.process import ProcessSandbox

__all__ = ["ExecutionRequest", "ExecutionResult", "ProcessSandbox", "Sandbox", "SandboxLimits", "make_sandbox"]


def make_sandbox(name: str, **kwargs) -> Sandbox:
    """Build a sandbox backend by name: ``process`` or ``docker``."""
    if name == "process":
        return ProcessSandbox(**kwargs)
    if name == "docker":
        from wmrl.autoresearch.environments.sandbox.docker import DockerSandbox

        return DockerSandbox(**kwargs)
    raise ValueError(f"unknown sandbox {name!r}: choose 'process' or 'docker'")
