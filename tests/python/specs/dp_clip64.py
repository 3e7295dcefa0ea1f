"""dp_clip.py's model, optimizer and clipping with batch 64."""
import dp_clip


def build():
    return dp_clip.build(batch=64)
