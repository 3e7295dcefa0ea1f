"""accum16.py's model and optimizer with batch 64."""
import accum16


def build():
    return accum16.build(batch=64)
