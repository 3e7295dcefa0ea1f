"""data_token_lm.py at batch 16, with grad_step/apply_step: data-parallel
runs on a token file (tests/python/test_distributed.py)."""
import data_token_lm


def build():
    return data_token_lm.build(batch=16, name="data_token_lm_grads16", grads=True)
