"""The VLA wing's policies: LeRobot ACT and SmolVLA behind the calls the RL update needs
(:mod:`~wmrl.vla.policies.chunk`), the tiny SmolVLM backbone generated locally for SmolVLA on CPU
(:mod:`~wmrl.vla.policies.smolvlm`), and the scripted PushT demonstrator (:mod:`~wmrl.vla.policies.scripted`)."""
