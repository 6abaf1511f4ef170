"""chiplore: learns an unfamiliar AI accelerator and optimizes kernels for it."""

__version__ = "0.1.0"
