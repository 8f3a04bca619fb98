"""The holder walk on CPU tensors: each way of keeping memory must name its holder, kind and fix.

Addresses are the tensors' data pointers, exactly what the allocator hook
reports on a GPU. Every case builds its leak, asks for the addresses of the
leaked allocations, and checks the answer.
"""

import collections
import ctypes
import gc
import sys
import weakref

import pytest
import torch

from gpuleak import holders

THIS_MODULE = __name__


def addresses(tensors):
    return [[t.data_ptr(), max(1, t.numel() * t.element_size())] for t in tensors]


def ask(*sites, seconds=5.0):
    request = {
        "request_id": 11,
        "sites": [
            {"site_id": index + 1, "label": "test.py:%d" % index, "addresses": site} for index, site in enumerate(sites)
        ],
    }
    answer = holders.answer_request(request, seconds)
    assert answer["request_id"] == 11
    assert "error" not in answer, answer
    assert 0 <= answer["seconds"] < seconds + 1
    return answer["sites"]


def ask_one(site):
    return ask(site)[0]


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


# ---- tensors kept by containers and variables -------------------------------

losses_with_graph = []
loss_values = []
cache_by_step = {}
recent = collections.deque(maxlen=4)
kept_exceptions = []
activations_from_hook = []
last_batch = None


def test_losses_appended_with_their_graph_name_the_list_and_the_item_fix():
    model = make_model()
    for _ in range(6):
        losses_with_graph.append(model(torch.randn(4, 8)).pow(2).mean())
    site = ask_one(addresses(losses_with_graph))
    assert site["matched_addresses"] == 6
    assert site["kind"] == "tensor"
    assert site["element_has_grad_fn"] is True
    assert site["graph_tensors_per_element"] >= 3
    holder = site["holder"]
    assert holder["type"] == "list" and holder["name"] == "losses_with_graph"
    assert holder["owner"] == "module %s" % THIS_MODULE
    assert holder["path"] == "%s.losses_with_graph" % THIS_MODULE
    assert holder["length"] == 6 and holder["bounded"] is False and holder["maxlen"] is None
    assert "loss.item()" in site["fix"]


def test_loss_item_appended_keeps_no_tensor():
    model = make_model()
    freed = []
    for _ in range(6):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        freed.append(weakref.ref(loss))
        loss_values.append(loss.item())
    del loss
    assert all(ref() is None for ref in freed)
    # The leaked-looking site is whatever memory those losses had: nothing
    # Python-visible holds it, and loss_values (floats) must not be blamed.
    buffers = [bytearray(64) for _ in range(6)]
    site = ask_one([[ctypes.addressof((ctypes.c_char * 64).from_buffer(b)), 64] for b in buffers])
    assert site["kind"] == "unknown" and site["matched_addresses"] == 0
    assert site["holder"] is None and site["fix"] is None


def test_memory_held_by_no_tensor_matches_nothing():
    buffer = bytearray(1 << 16)
    address = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
    site = ask_one([[address, len(buffer)]])
    assert site == {
        "site_id": 1,
        "matched_addresses": 0,
        "kind": "unknown",
        "holder": None,
        "graph_tensors_per_element": None,
        "element_has_grad_fn": False,
        "fix": None,
    }


def test_dict_keyed_by_step_is_a_cache_to_bound():
    for step in range(5):
        cache_by_step[step] = torch.randn(32)
    site = ask_one(addresses(cache_by_step.values()))
    assert site["kind"] == "tensor" and site["matched_addresses"] == 5
    assert site["holder"]["type"] == "dict" and site["holder"]["name"] == "cache_by_step"
    assert site["cause"] == "cache-by-step"
    assert "bound the cache" in site["fix"] and ".cpu()" in site["fix"]


def test_deque_with_maxlen_is_reported_bounded():
    for _ in range(9):
        recent.append(torch.randn(16))
    site = ask_one(addresses(recent))
    holder = site["holder"]
    assert holder["type"] == "deque" and holder["name"] == "recent"
    assert holder["bounded"] is True and holder["maxlen"] == 4 and holder["length"] == 4
    assert site["cause"] == "bounded-container"


def test_tensor_in_a_module_global():
    global last_batch
    last_batch = torch.randn(128)
    site = ask_one(addresses([last_batch]))
    holder = site["holder"]
    assert holder["type"] == "Tensor" and holder["name"] == "last_batch"
    assert holder["owner"] == "module %s" % THIS_MODULE and holder["length"] is None
    assert site["cause"] == "single-reference" and "del last_batch" in site["fix"]


def test_list_local_to_a_running_function():
    def train_loop():
        history = []
        for _ in range(5):
            history.append(torch.randn(20))
        return ask_one(addresses(history)), history

    site, history = train_loop()
    holder = site["holder"]
    assert holder["type"] == "list" and holder["name"] == "history"
    assert holder["owner"].startswith("local of ")
    assert "train_loop" in holder["owner"] and "test_holders.py:" in holder["owner"]
    assert holder["path"].endswith("train_loop.history")
    assert site["cause"] == "tensor-container"


def test_local_of_a_running_frame_is_not_kept_alive_by_the_walk():
    def train_loop():
        activation = torch.randn(1 << 12)
        watcher = weakref.ref(activation)
        site = ask_one(addresses([activation]))
        activation = None  # rebinding must free it: the walk may keep no snapshot of locals
        return site, watcher

    site, watcher = train_loop()
    assert site["holder"]["name"] == "activation" and "train_loop" in site["holder"]["owner"]
    assert watcher() is None


def test_instance_attribute():
    class Trainer:
        def __init__(self):
            self.outputs = []

    trainer = Trainer()
    for _ in range(4):
        trainer.outputs.append(torch.randn(8))
    site = ask_one(addresses(trainer.outputs))
    holder = site["holder"]
    assert holder["type"] == "list" and holder["name"] == "outputs"
    assert holder["owner"] == "attribute of Trainer" and holder["path"] == "Trainer.outputs"


def test_class_attribute():
    class Registry:
        seen = []

    for _ in range(3):
        Registry.seen.append(torch.randn(8))
    site = ask_one(addresses(Registry.seen))
    assert site["holder"]["name"] == "seen"
    assert site["holder"]["owner"] == "attribute of class Registry"


def test_dict_inside_a_global_names_the_subscript():
    history = {"loss": [], "step": []}
    globals()["metrics_history"] = history
    try:
        for _ in range(4):
            history["loss"].append(torch.randn(4))
        site = ask_one(addresses(history["loss"]))
        assert site["holder"]["type"] == "list"
        assert site["holder"]["name"] == "metrics_history['loss']"
        assert site["holder"]["path"] == "%s.metrics_history['loss']" % THIS_MODULE
    finally:
        del globals()["metrics_history"]


def test_exceptions_kept_in_a_list_keep_their_frames_tensors():
    def forward_that_fails(x):
        intermediate = x * 2 + 1
        raise ValueError("bad batch %d" % intermediate.numel())

    leaked = []
    for _ in range(5):
        x = torch.randn(64)
        try:
            forward_that_fails(x)
        except ValueError as error:
            kept_exceptions.append(error)
            leaked.append(error.__traceback__.tb_next.tb_frame.f_locals["intermediate"])
    ranges = addresses(leaked)
    del leaked  # the test's own list must not be what the walk finds
    site = ask_one(ranges)
    holder = site["holder"]
    assert holder["name"] == "kept_exceptions" and holder["type"] == "list"
    assert holder["owner"] == "exception traceback"
    assert site["cause"] == "exception-traceback"
    assert "str(e)" in site["fix"]


def test_forward_hook_saving_activations_into_a_global_list():
    model = make_model()
    handle = model[1].register_forward_hook(lambda module, inputs, output: activations_from_hook.append(output))
    try:
        for _ in range(4):
            model(torch.randn(2, 8))
        site = ask_one(addresses(activations_from_hook))
    finally:
        handle.remove()
    assert site["holder"]["name"] == "activations_from_hook"
    assert site["holder"]["filled_by"] == "hook on ReLU"
    assert site["cause"] == "forward-hook"
    assert ".detach()" in site["fix"] and "remove the hook" in site["fix"]


def test_forward_hook_saving_activations_in_its_closure():
    def make_recorder():
        saved = []

        def record(module, inputs, output):
            saved.append(output)

        return record

    model = make_model()
    hook = make_recorder()
    handle = model[0].register_forward_hook(hook)
    try:
        for _ in range(3):
            model(torch.randn(2, 8))
        site = ask_one(addresses(hook.__closure__[0].cell_contents))
    finally:
        handle.remove()
    holder = site["holder"]
    assert holder["name"] == "saved" and holder["owner"] == "hook on Linear"
    assert holder["path"].endswith("make_recorder.<locals>.record.saved")
    assert site["cause"] == "forward-hook"


def test_closure_cell_of_a_plain_function():
    def make_accumulator():
        store = []

        def add(t):
            store.append(t)

        return add

    add = make_accumulator()
    for _ in range(3):
        add(torch.randn(8))
    site = ask_one(addresses(add.__closure__[0].cell_contents))
    assert site["holder"]["name"] == "store"
    assert site["holder"]["owner"].startswith("closure of ") and "make_accumulator" in site["holder"]["owner"]


def test_tensor_used_as_a_dict_key():
    seen = {}
    globals()["seen_by_tensor"] = seen
    try:
        for _ in range(3):
            seen[torch.randn(8)] = True
        site = ask_one(addresses(seen))
        assert site["holder"]["type"] == "dict" and site["holder"]["name"] == "seen_by_tensor"
    finally:
        del globals()["seen_by_tensor"]


# ---- autograd graphs ----------------------------------------------------------

eval_outputs = []
running_total = None


def relu_outputs_saved_in(outputs):
    """The ReLU activations each output's graph saved (what a GPU trace would show growing)."""
    saved = []
    for output in outputs:
        for node, _ in output.grad_fn.next_functions:
            if node is not None and type(node).__name__.startswith("Relu"):
                saved.append(node._saved_result)
    return saved


def test_outputs_kept_without_no_grad_hold_their_graphs():
    model = make_model()
    for _ in range(5):
        eval_outputs.append(model(torch.randn(4, 8)))  # evaluation without torch.no_grad()
    ranges = addresses(relu_outputs_saved_in(eval_outputs))
    site = ask_one(ranges)
    assert site["kind"] == "graph"
    assert site["matched_addresses"] == 5
    assert site["element_has_grad_fn"] is True
    assert site["graph_tensors_per_element"] >= 2
    assert site["holder"]["name"] == "eval_outputs" and site["holder"]["type"] == "list"
    assert "no_grad" in site["fix"] and "detach()" in site["fix"]


def test_loss_accumulated_as_a_tensor_chains_every_graph():
    global running_total
    model = make_model()
    running_total = 0
    for _ in range(4):
        running_total = running_total + model(torch.randn(4, 8)).pow(2).mean()
    site = ask_one(addresses([running_total]))
    assert site["holder"]["type"] == "Tensor" and site["holder"]["name"] == "running_total"
    assert site["element_has_grad_fn"] is True
    assert site["graph_tensors_per_element"] >= 4 * 2
    assert site["cause"] == "graph-accumulated" and ".item()" in site["fix"]


def test_carried_rnn_state_is_named_rather_than_the_output_that_also_reaches_it():
    # Truncated BPTT without detach: `hidden` is fed back into every window,
    # so its graph chains all windows. `logits` of the last window reaches the
    # same chain (it is computed from `hidden`, as cuDNN's GRU node makes the
    # output and the hidden state together), but it is the carried state that
    # must be named, with the detach fix.
    torch.manual_seed(0)
    embed, cell, decoder = torch.nn.Embedding(50, 8), torch.nn.GRUCell(8, 16), torch.nn.Linear(16, 50)
    # A parameter as a direct input of the state's node, as cuDNN's GRU node
    # has its weights: its AccumulateGrad wrapper is remade on every visit.
    gain = torch.nn.Parameter(torch.ones(16))

    def evaluate(windows):
        hidden = torch.zeros(2, 16)
        made = []  # addresses only: nothing but the graph may hold these tensors
        for _ in range(windows):
            hidden = cell(embed(torch.randint(0, 50, (2,))), hidden) * gain
            logits = decoder(hidden)
            made.extend(addresses([hidden]))
        # What the chain keeps: every window's hidden state, saved by the next window.
        return ask_one(made[:-1]), logits

    site, _ = evaluate(12)
    assert site["kind"] == "graph", site
    assert site["holder"]["type"] == "Tensor" and site["holder"]["name"] == "hidden", site
    assert "evaluate" in site["holder"]["owner"]
    assert site["fix"].startswith("hidden chains every step's autograd graph: detach() it"), site
    assert "hidden = hidden.detach()" in site["fix"]


def test_graph_freed_by_backward_matches_nothing():
    model = make_model()
    kept_after_backward = []
    for _ in range(3):
        output = model(torch.randn(4, 8))
        saved = relu_outputs_saved_in([output])
        ranges = addresses(saved)
        del saved
        output.sum().backward()  # frees the saved tensors
        kept_after_backward.append(output.detach())
    del output
    gc.collect()
    site = ask_one(ranges)
    assert site["kind"] != "graph"


# ---- several sites, safety and limits ----------------------------------------------


def test_several_sites_are_answered_together():
    a = [torch.randn(4) for _ in range(3)]
    b = {i: torch.randn(4) for i in range(3)}
    globals()["site_a"], globals()["site_b"] = a, b
    try:
        first, second = ask(addresses(a), addresses(b.values()))
        assert (first["site_id"], first["holder"]["name"]) == (1, "site_a")
        assert (second["site_id"], second["holder"]["name"]) == (2, "site_b")
    finally:
        del globals()["site_a"], globals()["site_b"]


def test_walk_keeps_no_reference_once_it_returns():
    kept = [torch.randn(16) for _ in range(3)]
    globals()["briefly_kept"] = kept
    watchers = [weakref.ref(t) for t in kept]
    ask_one(addresses(kept))
    del globals()["briefly_kept"], kept
    assert all(w() is None for w in watchers)  # without gc.collect(): no cycle left behind


def test_walk_runs_no_code_of_the_objects_it_meets():
    class Touchy:
        touched = 0

        def __init__(self, payload):
            object.__setattr__(self, "payload", payload)

        def __getattribute__(self, name):
            type(self).touched += 1
            return object.__getattribute__(self, name)

        def __getattr__(self, name):
            type(self).touched += 1
            raise AttributeError(name)

    tensors = [torch.randn(8) for _ in range(3)]
    holder = Touchy(tensors)
    del tensors
    before = Touchy.touched
    site = ask_one(addresses(object.__getattribute__(holder, "payload")))
    assert Touchy.touched == before
    assert site["holder"]["name"] == "payload" and site["holder"]["owner"] == "attribute of Touchy"


def test_walk_is_bounded_by_its_time_budget():
    kept = [torch.randn(4) for _ in range(50)]
    globals()["many_kept"] = kept
    try:
        answer = holders.answer_request(
            {"request_id": 1, "sites": [{"site_id": 1, "addresses": addresses(kept)}]}, seconds=0.0
        )
        assert answer.get("timed_out") is True
        assert answer["seconds"] < 2.0
        assert answer["sites"][0]["site_id"] == 1
    finally:
        del globals()["many_kept"]


@pytest.mark.parametrize(
    "request_value",
    [{}, {"sites": None}, {"sites": [{"site_id": 1, "addresses": [["x", None], [1]]}]}, {"sites": "nonsense"}, None],
)
def test_malformed_requests_never_raise(request_value):
    answer = holders.answer_request(request_value)
    assert isinstance(answer, dict) and "seconds" in answer


def test_walk_restores_the_garbage_collector_state():
    assert gc.isenabled()
    ask_one([[1, 1]])
    assert gc.isenabled()
    gc.disable()
    try:
        ask_one([[1, 1]])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_walk_without_torch_says_so(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch")
    site = holders.answer_request({"sites": [{"site_id": 3, "addresses": [[4096, 8]]}]})["sites"][0]
    assert site["kind"] == "unknown" and "neither torch nor CuPy nor JAX" in site["note"]


replaced_points = []


def test_gradients_of_replaced_parameters_lead_to_the_optimizer_state():
    # examples/torch/holders/holder_optimizer_state_replaced_param.py's
    # shape: a parameter replaced every step while Adam's state keeps the old
    # one. Its gradient is held by the old leaf in C++ only; the walk climbs
    # from the gradient to the leaf, and from the leaf to Adam's state.
    points = torch.nn.Parameter(torch.randn(64, 3))
    optimizer = torch.optim.Adam([points], lr=0.01)
    gradients = []
    for _ in range(6):
        loss = points.pow(2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        gradients.append(points.grad)
        grown = torch.nn.Parameter(torch.cat([points.detach(), torch.randn(4, 3)]))
        optimizer.param_groups[0]["params"] = [grown]
        optimizer.state[grown] = {}
        points = grown
    old_gradients = addresses(gradients[:-1])
    del gradients
    site = ask_one(old_gradients)
    assert site["kind"] == "tensor" and site["matched_addresses"] == 5, site
    holder = site["holder"]
    assert holder["name"] == "state" and holder["owner"] == "attribute of Adam", holder


last_token_logits = []


def test_kept_slices_of_large_tensors_are_named_views_with_the_clone_fix():
    # The shape of a planted line in a GPT training script: the last token's
    # logits of each step, already detached, kept in a list; every slice
    # keeps its step's whole logits tensor.
    storages = []
    for _ in range(4):
        logits = torch.randn(64, 8192)  # 2 MiB
        storages.append([logits.data_ptr(), logits.numel() * logits.element_size()])
        last_token_logits.append(logits[:, -1].detach())
    del logits
    site = ask_one(storages)
    assert site["holder"]["name"] == "last_token_logits"
    assert site["cause"] == "view-keeps-base", site
    assert site["view"] == {"bytes": 64 * 4, "base_bytes": 64 * 8192 * 4}
    assert ".clone()" in site["fix"] and "2.0 MiB" in site["fix"], site["fix"]


trained_last_token_logits = []


def test_kept_detached_slices_are_views_while_the_current_steps_logits_still_have_a_graph():
    # As on the GPU: the walk runs during a step, when that step's logits (with
    # grad_fn, held by a local) cover the same site as the kept slices. The
    # holder's elements have no graph; one live tensor that does must not turn
    # the answer into "detach() before storing".
    head = torch.nn.Linear(16, 8192)
    storages = []
    for _ in range(4):
        logits = head(torch.randn(64, 16))  # 2 MiB, with grad_fn
        storages.append([logits.data_ptr(), logits.numel() * logits.element_size()])
        trained_last_token_logits.append(logits[:, -1].detach())
    site = ask_one(storages)
    assert logits.grad_fn is not None
    assert site["holder"]["name"] == "trained_last_token_logits", site
    assert site["element_has_grad_fn"] is False, site
    assert site["cause"] == "view-keeps-base", site
    assert ".clone()" in site["fix"] and "detach() before storing" not in site["fix"], site["fix"]


def test_a_kept_tensor_that_owns_its_storage_is_not_called_a_view():
    kept = [torch.randn(64, 8192)[:, -1].clone() for _ in range(3)]
    site = ask_one(addresses(kept))
    assert site["cause"] != "view-keeps-base"
    assert "view" not in site


class CatMetric:
    """Stands in for a torchmetrics metric with a list state (the walk reads the
    type's module, so this class claims torchmetrics' as its own)."""

    def __init__(self):
        self.value = []

    def update(self, tensor):
        self.value.append(tensor)


CatMetric.__module__ = "torchmetrics.aggregation"
epoch_metric = CatMetric()


def test_a_library_that_keeps_the_tensors_gets_the_fix_that_library_documents():
    for _ in range(4):
        epoch_metric.update(torch.randn(256))
    site = ask_one(addresses(epoch_metric.value))
    assert site["holder"]["name"] == "value", site["holder"]
    assert site["cause"] == "metric-state-not-reset", site
    assert ".reset()" in site["fix"] and "compute_on_cpu=True" in site["fix"]
    assert ".cpu() copies" not in site["fix"]


LIBRARY_METRIC_SOURCE = '''
class ListStateMetric:
    """A metric whose list state the library itself appends to."""

    def __init__(self):
        self._list_state = []

    def update(self, preds):
        self._list_state.append(preds)


ListStateMetric.__module__ = "torchmetrics.classification"
'''


def test_a_holder_inside_a_library_is_kept_at_the_call_that_hands_it_the_tensors(tmp_path):
    # The metric's own append is in site-packages, a line the user does not change:
    # the keeping statement is the program's metric.update(...).
    import importlib.util
    import inspect

    folder = tmp_path / "site-packages"
    folder.mkdir()
    (folder / "standin_metrics.py").write_text(LIBRARY_METRIC_SOURCE)
    spec = importlib.util.spec_from_file_location("standin_metrics", str(folder / "standin_metrics.py"))
    library = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(library)
    metric = library.ListStateMetric()
    for _ in range(4):
        metric.update(torch.randn(256))  # HANDED OVER
    handed_over = inspect.currentframe().f_lineno - 1
    site = ask_one(addresses(metric._list_state))
    assert site["holder"]["name"] == "_list_state", site["holder"]
    assert site["cause"] == "metric-state-not-reset", site
    kept = site["holder"]["kept_at"]
    assert kept["kind"] == "library-call", kept
    assert kept["line"] == handed_over and kept["file"] == __file__, kept
    assert "metric.update(torch.randn(256))" in kept["statement"]
