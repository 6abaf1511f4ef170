"""The functional executor: a lowered program run on numpy, its fixtures and grading."""
