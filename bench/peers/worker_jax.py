"""bench/peers worker: the MNIST CNN's step in JAX (mnist_jax.py), jitted
with donated params, optimizer state and RNG key.

    worker_jax.py --threads T

The driver sets XLA_FLAGS and the CPU affinity before this starts (XLA reads
both at start-up); the note reports what this process got.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from protocol import serve  # noqa: E402


def setup(a):
    import jax
    import jax.numpy as jnp
    import numpy as np

    import mnist_jax as m
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((64, 28, 28, 1), dtype=np.float32))
    y = jnp.asarray(rng.integers(0, 10, 64, dtype=np.int32))
    state = [m.init_params(), None, jax.random.key(1)]
    state[1] = m.optimizer().init(state[0])

    def step():
        # The donated inputs are dead after the call: carry the outputs.
        state[0], state[1], state[2], loss = m.jit_train_step(state[0], state[1], state[2], x, y)
        return state

    def note():
        return (f"jax {jax.__version__}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}, "
                f"{len(os.sched_getaffinity(0))} CPUs in affinity")
    return step, jax.block_until_ready, note, lambda: ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    serve(lambda: setup(ap.parse_args()))


if __name__ == "__main__":
    main()
