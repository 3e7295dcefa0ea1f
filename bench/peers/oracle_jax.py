"""Runs mnist_jax's step on weights, batch and dropout masks from torch, for
tests/python/test_peers.py (the oracle: torch eager on the same inputs).

    oracle_jax.py IN.npz OUT.npz

IN: sd/NAME (torch state_dict), x [N,1,28,28], y, and per step i the kept
(0/1) dropout masks mask1_i [N,12,12,64] (NHWC) and mask2_i [N,128].
OUT: grad/NAME (step 0's gradients), loss_i, and sd/NAME after the steps,
all in torch's layout.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

import mnist_jax as m


def main(src, dst):
    d = np.load(src)
    sd = {k[3:]: d[k] for k in d.files if k.startswith("sd/")}
    params = {k: jnp.asarray(v) for k, v in m.from_torch(sd).items()}
    opt_state = m.optimizer().init(params)
    x = jnp.asarray(np.transpose(d["x"], (0, 2, 3, 1)))
    y = jnp.asarray(d["y"].astype(np.int32))
    step = jax.jit(m.step_with_masks)
    out = {}
    i = 0
    while f"mask1_{i}" in d.files:
        masks = (jnp.asarray(d[f"mask1_{i}"]), jnp.asarray(d[f"mask2_{i}"]))
        if i == 0:
            grads = jax.grad(m.loss_fn)(params, x, y, masks)
            out.update({f"grad/{k}": v for k, v in m.to_torch(grads).items()})
        params, opt_state, loss = step(params, opt_state, x, y, masks)
        out[f"loss_{i}"] = np.asarray(loss)
        i += 1
    out.update({f"sd/{k}": v for k, v in m.to_torch(params).items()})
    np.savez(dst, **out)


if __name__ == "__main__":
    main(*sys.argv[1:])
