"""Environments: the real sandbox + grader, and (later) world models, behind one `step` protocol."""
