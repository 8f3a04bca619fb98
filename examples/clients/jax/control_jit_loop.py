"""JAX control: a jitted training loop that keeps nothing; the device looks full anyway.

Reported: https://github.com/jax-ml/jax/issues/3892 ("Memory leak when
calling jax script in python" -- JAX preallocates most of the device at
start, so nvidia-smi shows it full whatever the program does) and JAX's
GPU memory allocation notes (XLA_PYTHON_CLIENT_PREALLOCATE,
XLA_PYTHON_CLIENT_ALLOCATOR=platform).

Each step replaces the parameters; old ones are freed. Not a leak, with the
default allocator or the platform one.

    python3 control_jit_loop.py --steps 200 [--device cuda|cpu]

Prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per step.
"""
import argparse
import json
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp

    if args.device == "cpu":
        jax.config.update("jax_platforms", "cpu")
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    params = {"w1": jax.random.normal(k1, (512, 512)) * 0.05,
              "w2": jax.random.normal(k2, (512, 10)) * 0.05}
    x = jax.random.normal(k3, (256, 512))
    y = jnp.arange(256) % 10

    def loss_fn(p, x, y):
        logits = jnp.tanh(x @ p["w1"]) @ p["w2"]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y])

    @jax.jit
    def train_step(p, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda w, g: w - 0.1 * g, p, grads), loss

    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        params, loss = train_step(params, x, y)
        loss = float(loss)
        print("CLIENT_STEP " + json.dumps({"step": step, "loss": loss,
                                           "step_ms": (time.perf_counter() - started) * 1e3}),
              flush=True)


if __name__ == "__main__":
    main()
