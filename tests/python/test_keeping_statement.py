"""The keeping statement: the holder found at run time joined with the source
of its owner, on real files (a module written to a temporary folder and
imported, as a program's own file is).

Each function of the module below builds one leak the way programs do and
asks the holder walk about the kept tensors' addresses, from inside the
running function (as a step boundary does); the line marked `# KEPT` is the
statement the answer must name.
"""
import importlib.util
import os
import sys
import textwrap

import pytest
import torch

from gpuleak import holders

MODULE_SOURCE = textwrap.dedent(
    '''
    import functools
    import torch

    def addresses(tensors):
        return [[t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else
                 t.storage().data_ptr(), max(1, t.numel() * t.element_size())] for t in tensors]

    def ask(pairs):
        request = {"request_id": 1, "sites": [{"site_id": 1, "addresses": pairs}]}
        return holders.answer_request(request, 10.0)["sites"][0]

    def extend_in_loop():
        kept = []
        kept.extend([])
        for _ in range(4):
            kept.extend(torch.randn(3, 8).unbind(0))  # KEPT extend
        return ask(addresses(kept))

    def the_store_inside_the_loop_wins():
        outputs = [torch.zeros(4)]
        outputs.append(torch.ones(4))
        for _ in range(3):
            outputs.append(torch.randn(4))  # KEPT in-loop
        return ask(addresses(outputs))

    def initialisations_do_not_count():
        history = None
        history = []
        for step in range(4):
            history += [torch.randn(16)]  # KEPT augmented
        return ask(addresses(history))

    def concatenation_reassigns_itself():
        preds = None
        for _ in range(4):
            logits = torch.randn(8, 4)
            preds = logits if preds is None else torch.cat((preds, logits))  # KEPT self-assignment
        pairs = addresses([preds])
        logits = None
        return ask(pairs)

    class Cache:
        def __init__(self):
            self.by_key = {}

        def put(self, key, value):
            self.by_key[key] = value  # KEPT item-assignment

    def attribute_item_assignment_in_a_method():
        cache = Cache()
        for key in range(4):
            cache.put(key, torch.randn(8))
        return ask(addresses(cache.by_key.values()))

    def closure_variable_filled_in_the_closure():
        def make():
            store = []
            def add(t):
                store.append(t)  # KEPT closure
            return add
        add = make()
        for _ in range(3):
            add(torch.randn(8))
        return ask(addresses(add.__closure__[0].cell_contents))

    @functools.lru_cache(maxsize=None)  # KEPT lru
    def table(n):
        return torch.randn(n)

    def lru_cache_decorator():
        return ask(addresses([table(n) for n in (5, 6, 7)]))

    def hook_registered_per_call():
        conv = torch.nn.Linear(4, 4)
        for _ in range(3):
            mask = torch.rand(4)
            conv.register_forward_hook(lambda m, i, o, mask=mask: o * mask)  # KEPT hook
        pairs = addresses([h.__defaults__[0] for h in conv._forward_hooks.values()])
        mask = None
        return ask(pairs)

    def create_graph_cycle():
        for _ in range(3):
            x = torch.randn(64, requires_grad=True)
            y = x.tanh()
            y.backward(torch.ones_like(y), create_graph=True)  # KEPT create-graph
        import gc
        del x, y
        pairs = addresses([t for t in gc.get_objects() if isinstance(t, torch.Tensor) and t.is_leaf
                           and t.requires_grad and t.grad is not None and t.grad.grad_fn is not None])
        return ask(pairs)

    class AverageMeter:
        def __init__(self):
            self.sum = 0
            self.count = 0

        def update(self, val, n=1):
            self.sum += val * n  # KEPT meter
            self.count += n

    def meter_updated_with_the_loss_tensor():
        meter = AverageMeter()
        layer = torch.nn.Linear(32, 32)
        for _ in range(4):
            loss = layer(torch.randn(8, 32)).tanh().mean()
            meter.update(loss, 8)  # CALLER meter
        return ask(addresses([meter.sum]))

    shared_losses = []

    def ask_from_here(pairs, line):
        """As ask(), with the allocation's stack at `line` of this file."""
        request = {"request_id": 1, "sites": [{"site_id": 1, "addresses": pairs,
                                               "lines": [[__file__, line]]}]}
        return holders.answer_request(request, 10.0)["sites"][0]

    def loss_kept_every_repetition():
        import inspect

        layer = torch.nn.Linear(8, 8)
        for _ in range(3):
            loss = layer(torch.randn(4, 8)).sum()
            shared_losses.append(loss)  # KEPT shared-list
        here = inspect.currentframe().f_lineno
        return ask_from_here(addresses([t for t in shared_losses if torch.is_tensor(t)]), here)

    # Written after the leaking function, as in the pytest file where this was seen: the
    # later store must not win for being later.
    def loss_item_every_repetition():
        layer = torch.nn.Linear(8, 8)
        for _ in range(3):
            shared_losses.append(layer(torch.randn(4, 8)).sum().item())

    def load_batch(step):
        batch = torch.randn(64)
        raise RuntimeError("bad batch %d" % step)

    def exceptions_kept_through_exc_info():
        import sys
        failures = []
        for step in range(3):
            try:
                load_batch(step)
            except RuntimeError:
                failures.append(sys.exc_info())  # KEPT exc-info
        return ask(addresses([tb.tb_next.tb_frame.f_locals["batch"] for _, _, tb in failures]))

    def evaluate_sum(steps):
        layer = torch.nn.Linear(8, 8)
        total_loss = 0
        for _ in range(steps):
            loss = layer(torch.randn(4, 8)).tanh().mean()
            total_loss += loss  # KEPT returned-sum
        return total_loss

    def sum_returned_to_a_variable():
        # Asked after evaluate_sum returned (as at a tracked block's end): the holder is
        # `kept`, the statement that made it keep every step's graph is in evaluate_sum.
        kept = evaluate_sum(3)  # CALLER returned-sum
        return ask(addresses([kept]))
'''
)

CASES = {
    "extend_in_loop": ("extend", "kept", "extend"),
    "the_store_inside_the_loop_wins": ("in-loop", "outputs", "append"),
    "initialisations_do_not_count": ("augmented", "history", "augmented-assignment"),
    "concatenation_reassigns_itself": ("self-assignment", "preds", "self-assignment"),
    "attribute_item_assignment_in_a_method": ("item-assignment", "by_key", "item-assignment"),
    "closure_variable_filled_in_the_closure": ("closure", "store", "append"),
    "lru_cache_decorator": ("lru", "table", "lru-cache"),
    "hook_registered_per_call": ("hook", "_forward_hooks", "hook-registration"),
    "create_graph_cycle": ("create-graph", "x", "backward-create-graph"),
    "meter_updated_with_the_loss_tensor": ("meter", "sum", "augmented-assignment"),
    "exceptions_kept_through_exc_info": ("exc-info", "failures", "append"),
    "loss_kept_every_repetition": ("shared-list", "shared_losses", "append"),
    "sum_returned_to_a_variable": ("returned-sum", "kept", "augmented-assignment"),
}
# The program's call the keeping statement is reached from: (function, statement).
CALLERS = {
    "meter": ("meter_updated_with_the_loss_tensor", "meter.update(loss, 8)"),
    "returned-sum": ("sum_returned_to_a_variable", "kept = evaluate_sum(3)"),
}


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("program") / "train_job.py"
    path.write_text(MODULE_SOURCE)
    spec = importlib.util.spec_from_file_location("train_job", str(path))
    module = importlib.util.module_from_spec(spec)
    module.holders = holders
    sys.modules["train_job"] = module
    spec.loader.exec_module(module)
    lines = {}
    for number, text in enumerate(MODULE_SOURCE.splitlines(), start=1):
        if "# KEPT " in text:
            lines[text.split("# KEPT ")[1].strip()] = number
        if "# CALLER " in text:
            lines["caller " + text.split("# CALLER ")[1].strip()] = number
    yield module, str(path), lines
    del sys.modules["train_job"]


@pytest.mark.parametrize("function", sorted(CASES))
def test_the_keeping_statement_is_the_marked_line(program, function):
    module, path, lines = program
    marker, name, kind = CASES[function]
    site = getattr(module, function)()
    holder = site["holder"]
    assert holder is not None, site
    assert holder["name"] == name, holder
    kept = holder["kept_at"]
    assert os.path.samefile(kept["file"], path)
    assert kept["line"] == lines[marker], (kept, lines[marker])
    assert kept["kind"] == kind
    assert "# KEPT" in kept["statement"]  # the text travels with the answer
    # A store inside a method also names the program's call that runs it.
    caller = kept.get("called_from")
    if "caller " + marker in lines:
        assert caller is not None, kept
        assert caller["line"] == lines["caller " + marker], (caller, lines)
        assert caller["function"] == CALLERS[marker][0]
        assert CALLERS[marker][1] in caller["statement"]
    elif kept["function"].count(".") == 0:
        assert caller is None, kept


def test_library_files_are_never_searched():
    from gpuleak.holders.keeping_statement import is_library_file

    assert is_library_file(torch.__file__)
    assert is_library_file(os.__file__)
    assert is_library_file(holders.__file__)
    assert not is_library_file("/home/me/job/train.py")
