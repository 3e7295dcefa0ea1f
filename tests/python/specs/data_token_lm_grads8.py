"""data_token_lm.py at batch 8, with grad_step/apply_step: data-parallel
runs on a token file (tests/python/test_distributed.py)."""
import data_token_lm


def build():
    return data_token_lm.build(batch=8, name="data_token_lm_grads8", grads=True)
