"""accum16.py's model and optimizer with batch 32 (2 ranks x 32 = one batch of 64)."""
import accum16


def build():
    return accum16.build(batch=32)
