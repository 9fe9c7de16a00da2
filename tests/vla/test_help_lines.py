"""Every config key of the VLA classes has its own help line (`wmrl fit --help` reads the class docstrings; a
grouped ``a / b: ...`` entry left both keys without one)."""

import importlib
import inspect

import pytest
from docstring_parser import parse

CONFIGURABLE = ["wmrl.vla.module:VLAGRPOModule", "wmrl.vla.datamodule.lerobot:LeRobotVLADataModule",
                "wmrl.vla.simulators.pusht:PushTSimulator", "wmrl.vla.world_models.progress:ProgressWorldModel",
                "wmrl.vla.policies.chunk:ACTChunkPolicy", "wmrl.vla.policies.chunk:SmolVLAChunkPolicy",
                "wmrl.vla.warm_start:BehaviourCloningWarmStart"]


@pytest.mark.parametrize("target", CONFIGURABLE)
def test_every_config_key_has_its_own_help_line(target):
    module, name = target.split(":")
    cls = getattr(importlib.import_module(module), name)
    described = {p.arg_name: p.description for p in parse(cls.__doc__ or "").params}
    keys = [k for k in inspect.signature(cls.__init__).parameters if k != "self"]
    assert [k for k in keys if not described.get(k)] == []
