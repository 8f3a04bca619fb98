"""JAX training loop that appends each step's metrics, still device arrays, to a Python list.

Sources:
  https://github.com/google/flax/issues/1406  (HF Flax causal-LM script runs out of memory: "the
      fragmentation/OOM is caused by storing training metrics (on device) in the `training_metrics` list. If
      the number of steps per epoch is really large ...")
  https://github.com/sanchit-gandhi/seq2seq-speech/pull/21  ("we continually append the device array
      `train_metric` to the list `train_metrics` over the course of training ... holding the device arrays in
      this list can cause TPU OOM's")
  https://jax.readthedocs.io/en/latest/gpu_memory_allocation.html  (preallocation; XLA_PYTHON_CLIENT_ALLOCATOR=platform)

What was reported: Flax training scripts returned a metrics dict from the
jitted train step and appended it to `train_metrics`, to be written to
TensorBoard at the end of the epoch; with long epochs the device arrays kept in
the list exhausted accelerator memory.

This program: a jitted SGD step on an MLP (jax.value_and_grad, no optax)
returns new parameters and {"loss", "grad_norm"}; the loop appends the
metrics to `train_metrics` and only reads them back at the end. Each step
keeps two small device buffers alive: the smallest leak a loop can have, one
allocation size, many allocations.

JAX preallocates 75% of the device by default and suballocates from it, so
the driver sees no allocation per step. The corpus runs this program twice:
with XLA_PYTHON_CLIENT_ALLOCATOR=platform (every buffer is a driver
allocation) and with JAX's default allocator (XLA_PYTHON_CLIENT_MEM_FRACTION
lowered so that parallel cases fit; still preallocated).

Iteration: one jitted training step.
Leak: 2 scalar float32 buffers per step (8 bytes of data; with the platform allocator 2 driver allocations per step).
Fix: append jax.device_get(metrics) (host values), or reduce the metrics on device every N steps.
"""
import argparse
import time

import jax
import jax.numpy as jnp

BATCH = 256
FEATURES = 128
HIDDEN = 256
CLASSES = 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300, help="training steps (default 300)")
    return parser.parse_args()


def init_params(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (FEATURES, HIDDEN)) * 0.05, "b1": jnp.zeros(HIDDEN),
            "w2": jax.random.normal(k2, (HIDDEN, CLASSES)) * 0.05, "b2": jnp.zeros(CLASSES)}


def loss_fn(params, x, y):
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    logits = hidden @ params["w2"] + params["b2"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@jax.jit
def train_step(params, key, learning_rate):
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (BATCH, FEATURES))
    y = jax.random.randint(ky, (BATCH,), 0, CLASSES)
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params = jax.tree_util.tree_map(lambda p, g: p - learning_rate * g, params, grads)
    grad_norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(grads)))
    return params, {"loss": loss, "grad_norm": grad_norm}


def main():
    args = parse_args()
    key = jax.random.PRNGKey(0)
    params = init_params(key)
    learning_rate = jnp.float32(0.1)
    train_metrics = []
    started = time.monotonic()
    for step in range(args.iterations):
        params, metrics = train_step(params, jax.random.fold_in(key, step), learning_rate)
        train_metrics.append(metrics)  # LEAK: device arrays kept in a Python list (two per step)
    jax.block_until_ready(params)
    losses = [float(m["loss"]) for m in jax.device_get(train_metrics)]
    print("iterations=%d last_loss=%.4f seconds=%.2f backend=%s" % (
        args.iterations, losses[-1], time.monotonic() - started, jax.default_backend()))


if __name__ == "__main__":
    main()
