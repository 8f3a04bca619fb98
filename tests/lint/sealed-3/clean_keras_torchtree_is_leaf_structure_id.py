# Source: https://github.com/keras-team/keras/issues/23110 ("GPU Memory leak in torch backend:
#   torchtree_impl.py closure captures tensor containers"), fixed by
#   https://github.com/keras-team/keras/pull/23111; file keras/src/tree/torchtree_impl.py as
#   stored after the fix (excerpt: _dict_to_ordered_dict and traverse), unchanged
# Reported: "When using the torch backend, predict_on_batch in a loop leaks GPU memory linearly
#   until OOM ... Both _dict_to_ordered_dict and traverse use: is_leaf=lambda x: x is not
#   structure. The lambda captures structure (which holds GPU tensors) by reference. PyTorch's
#   tree_flatten internally creates a self-referential helper closure that captures is_leaf ...
#   GPU tensors remain allocated until the cyclic GC runs"
# Pattern: the same traversal, but the is_leaf lambda closes over `structure_id`, an int taken
#   with id(structure), not over the container: no closure holds the batch's tensors, and they
#   are freed when the call returns.
# Label: control: nothing here keeps GPU memory across calls
from collections import defaultdict

from torch.utils import _pytree as torch_tree


def _tree_is_leaf(tree, is_leaf=None):
    if is_leaf is not None and is_leaf(tree):
        return True
    return torch_tree._get_node_type(tree) not in torch_tree.SUPPORTED_NODES


def _dict_to_ordered_dict(structure):
    if _tree_is_leaf(structure):
        return structure

    def func(x):
        if type(x) is dict:
            return {k: _dict_to_ordered_dict(x[k]) for k in sorted(x.keys())}
        elif type(x) is defaultdict:
            return defaultdict(
                x.default_factory,
                {k: _dict_to_ordered_dict(x[k]) for k in sorted(x.keys())},
            )
        return None

    def traverse_children():
        structure_id = id(structure)
        children, treedef = torch_tree.tree_flatten(
            structure,
            is_leaf=lambda x: id(x) != structure_id,
        )
        if treedef.num_nodes == 1 and treedef.num_leaves == 1:
            return structure
        else:
            return torch_tree.tree_unflatten(
                [_dict_to_ordered_dict(c) for c in children],
                treedef,
            )

    ret = func(structure)
    if ret is None:
        return traverse_children()
    if isinstance(ret, type) and ret.__name__ == "MAP_TO_NONE":
        return None
    return ret


def traverse(func, structure, top_down=True):
    def traverse_children():
        structure_id = id(structure)
        children, treedef = torch_tree.tree_flatten(
            structure,
            is_leaf=lambda x: id(x) != structure_id,
        )
        if treedef.num_nodes == 1 and treedef.num_leaves == 1:
            return structure
        else:
            return torch_tree.tree_unflatten(
                [traverse(func, c, top_down=top_down) for c in children],
                treedef,
            )

    structure = _dict_to_ordered_dict(structure)
    if top_down:
        ret = func(structure)
        if ret is None:
            return traverse_children()
    else:
        traversed_structure = traverse_children()
        ret = func(traversed_structure)
        if ret is None:
            return traversed_structure
    if isinstance(ret, type) and ret.__name__ == "MAP_TO_NONE":
        return None
    return ret


def flatten(structure):
    structure = _dict_to_ordered_dict(structure)
    leaves, _ = torch_tree.tree_flatten(structure)
    return leaves


def lists_to_tuples(structure):
    def list_to_tuple(instance):
        return tuple(instance) if isinstance(instance, list) else None

    return traverse(list_to_tuple, structure, top_down=False)
