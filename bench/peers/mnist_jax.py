"""examples/mnist/spec.py's CNN, loss and optimizer in plain JAX + optax:
conv 1->32 3x3, relu, conv 32->64 3x3, relu, max-pool 2, dropout 0.25,
flatten, linear 9216->128, relu, dropout 0.5, linear 128->10, log-softmax,
mean NLL loss, Adadelta(lr=1.0, rho=0.9, eps=1e-6), batch 64.

Layout is JAX's usual NHWC / HWIO (what XLA:CPU is tuned for), so torch's
weights are transposed on the way in (from_torch) and fc1's rows permuted:
torch flattens (C, H, W), NHWC flattens (H, W, C).
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax

P_DROP1, P_DROP2 = 0.25, 0.5
LR, RHO, EPS = 1.0, 0.9, 1e-6


def optimizer():
    return optax.adadelta(learning_rate=LR, rho=RHO, eps=EPS)


def _conv(x, w, b):
    y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return y + b


def forward(params, x, masks=None):
    """x: [N, 28, 28, 1]. masks: (m1 [N,12,12,64], m2 [N,128]) of 0/1, or
    None for no dropout (eval)."""
    x = jax.nn.relu(_conv(x, params["conv1_w"], params["conv1_b"]))
    x = jax.nn.relu(_conv(x, params["conv2_w"], params["conv2_b"]))
    x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    if masks is not None:
        x = x * masks[0] * (1.0 / (1.0 - P_DROP1))
    x = x.reshape(x.shape[0], -1)
    x = jax.nn.relu(x @ params["fc1_w"] + params["fc1_b"])
    if masks is not None:
        x = x * masks[1] * (1.0 / (1.0 - P_DROP2))
    x = x @ params["fc2_w"] + params["fc2_b"]
    return jax.nn.log_softmax(x, axis=1)


def loss_fn(params, x, y, masks):
    logp = forward(params, x, masks)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def dropout_masks(key, n):
    k1, k2 = jax.random.split(key)
    return (jax.random.bernoulli(k1, 1.0 - P_DROP1, (n, 12, 12, 64)).astype(jnp.float32),
            jax.random.bernoulli(k2, 1.0 - P_DROP2, (n, 128)).astype(jnp.float32))


def step_with_masks(params, opt_state, x, y, masks):
    """One training step with given dropout masks (the oracle test's entry)."""
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y, masks)
    updates, opt_state = optimizer().update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def train_step(params, opt_state, key, x, y):
    """The benchmarked step: fresh dropout masks from the carried key."""
    key, sub = jax.random.split(key)
    params, opt_state, loss = step_with_masks(params, opt_state, x, y,
                                              dropout_masks(sub, x.shape[0]))
    return params, opt_state, key, loss


# params, opt_state and the key are donated: XLA updates them in place, as
# trainstep and torch.optim do.
jit_train_step = jax.jit(train_step, donate_argnums=(0, 1, 2))


def init_params(seed=1):
    """torch's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights
    and biases (the values do not matter for timing, only the shapes)."""
    rng = np.random.default_rng(seed)

    def u(fan_in, shape):
        b = 1.0 / np.sqrt(fan_in)
        return jnp.asarray(rng.uniform(-b, b, shape).astype(np.float32))
    return {"conv1_w": u(9, (3, 3, 1, 32)), "conv1_b": u(9, (32,)),
            "conv2_w": u(288, (3, 3, 32, 64)), "conv2_b": u(288, (64,)),
            "fc1_w": u(9216, (9216, 128)), "fc1_b": u(9216, (128,)),
            "fc2_w": u(128, (128, 10)), "fc2_b": u(128, (10,))}


def from_torch(sd):
    """JAX params from the torch Net's state_dict, as numpy arrays."""
    hwio = lambda w: np.ascontiguousarray(np.transpose(w, (2, 3, 1, 0)))  # noqa: E731
    fc1 = sd["fc1.weight"].reshape(128, 64, 12, 12).transpose(2, 3, 1, 0).reshape(9216, 128)
    return {"conv1_w": hwio(sd["conv1.weight"]), "conv1_b": sd["conv1.bias"],
            "conv2_w": hwio(sd["conv2.weight"]), "conv2_b": sd["conv2.bias"],
            "fc1_w": np.ascontiguousarray(fc1), "fc1_b": sd["fc1.bias"],
            "fc2_w": np.ascontiguousarray(sd["fc2.weight"].T), "fc2_b": sd["fc2.bias"]}


def to_torch(params):
    """The inverse of from_torch: torch state_dict layout, as numpy arrays."""
    p = {k: np.asarray(v) for k, v in params.items()}
    oihw = lambda w: np.ascontiguousarray(np.transpose(w, (3, 2, 0, 1)))  # noqa: E731
    fc1 = p["fc1_w"].reshape(12, 12, 64, 128).transpose(3, 2, 0, 1).reshape(128, 9216)
    return {"conv1.weight": oihw(p["conv1_w"]), "conv1.bias": p["conv1_b"],
            "conv2.weight": oihw(p["conv2_w"]), "conv2.bias": p["conv2_b"],
            "fc1.weight": np.ascontiguousarray(fc1), "fc1.bias": p["fc1_b"],
            "fc2.weight": np.ascontiguousarray(p["fc2_w"].T), "fc2.bias": p["fc2_b"]}
