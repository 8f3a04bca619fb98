"""NOT A LEAK: a jitted JAX training loop that replaces its parameters and reads metrics back to the host.

Sources:
  https://jax.readthedocs.io/en/latest/gpu_memory_allocation.html  (JAX preallocates 75% of the GPU;
      XLA_PYTHON_CLIENT_PREALLOCATE=false allocates on demand; XLA_PYTHON_CLIENT_ALLOCATOR=platform
      "allocate[s] exactly what is needed on demand, and deallocate[s] memory that is no longer needed")
  https://github.com/google-deepmind/PGMax/issues/8  (a loop whose GPU memory seemed to grow; the first
      advice: set XLA_PYTHON_CLIENT_ALLOCATOR=platform and look again)
  https://github.com/jax-ml/jax/issues/3892  ("Memory leak when calling jax script in python": a loop that
      calls a JAX training function runs out of memory after a few calls; the reporter knows the GPU memory
      allocation note but does not want to change preallocation)

What was reported: under JAX's default allocator nvidia-smi shows most of the
GPU in use from the first step, and users suspect leaks; the documented way to
see what a loop really holds is the platform allocator, under which every
buffer is allocated when needed and freed when its last reference goes.

This program: the same jitted SGD step as leak_jax_metrics_on_device.py, but
the loop reads the loss back with float() each step (host values only) and
keeps nothing on the device but the current parameters; every step allocates
new parameter buffers and frees the old ones. The corpus runs it with
XLA_PYTHON_CLIENT_ALLOCATOR=platform (driver allocations and frees every step).

Iteration: one jitted training step.
Verdict: NO LEAK.
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
    parser.add_argument("--iterations", type=int, default=800, help="training steps (default 800)")
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
def train_step(params, key):
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (BATCH, FEATURES))
    y = jax.random.randint(ky, (BATCH,), 0, CLASSES)
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss


def main():
    args = parse_args()
    key = jax.random.PRNGKey(0)
    params = init_params(key)
    losses = []
    started = time.monotonic()
    for step in range(args.iterations):
        params, loss = train_step(params, jax.random.fold_in(key, step))
        losses.append(float(loss))
    print("iterations=%d last_loss=%.4f seconds=%.2f backend=%s" % (
        args.iterations, losses[-1], time.monotonic() - started, jax.default_backend()))


if __name__ == "__main__":
    main()
