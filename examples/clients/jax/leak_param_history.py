"""JAX: a jitted training loop that keeps every step's weights in a Python list.

Reported: https://github.com/jax-ml/jax/issues/1491 ("I have no idea why it
keep increasing memory usage ... any method to trace memory usage?") and
https://github.com/vicariousinc/PGMax/pull/97 (device arrays kept outside the
jitted function are what stays on the GPU).

Each step appends the new first-layer weights (512 x 512 float32, 1 MiB) to
`weight_history` "to plot their drift later". Run it twice: with JAX's
default preallocation (one large block, nothing inside it visible to the
driver) and with XLA_PYTHON_CLIENT_ALLOCATOR=platform (every buffer a driver
allocation).

    python3 leak_param_history.py --steps 200 [--device cuda|cpu]

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

    weight_history = []
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        params, loss = train_step(params, x, y)
        weight_history.append(params["w1"])  # LEAK: tensors-kept-alive
        loss = float(loss)
        print("CLIENT_STEP " + json.dumps({"step": step, "loss": loss,
                                           "step_ms": (time.perf_counter() - started) * 1e3}),
              flush=True)


if __name__ == "__main__":
    main()
