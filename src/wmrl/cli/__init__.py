"""The ``wmrl`` command: the application layer on top of the RL core and its two domains.

- :mod:`wmrl.cli.commands`: the entry point (:func:`main`) and the parser of wmrl's own subcommands, which live in
  :mod:`wmrl.cli.tasks` (``tasks ...``), :mod:`wmrl.cli.scripts` (``exec``, ``leak-scan``) and
  :mod:`wmrl.cli.evaluate` (``evaluate``), with what they share in :mod:`wmrl.cli.common`;
- :mod:`wmrl.cli.trainer`: ``wmrl fit|validate|test``, a LightningCLI (:class:`~wmrl.cli.trainer.WMRLCli`);
- :mod:`wmrl.cli.quick_help`: ``wmrl fit --help`` without importing Lightning;
- :mod:`wmrl.cli.evaluate`: ``wmrl evaluate``, the paired comparison of policies.

``wmrl ...`` and ``python -m wmrl.cli ...`` run the same :func:`main`.
"""

from wmrl.cli.commands import build_parser, lightning_cli, main
from wmrl.cli.quick_help import LIGHTNING_COMMANDS

__all__ = ["LIGHTNING_COMMANDS", "build_parser", "lightning_cli", "main"]
