# Shape of pytorch/pytorch:torch/_inductor/cudagraph_trees.py (CUDAGraphNode.__init__ and
# _add_first_outputs), shortened. Clean: outputs that are not tensors are recorded as
# they are (ints, None), tensors only as metadata, storage indices (ints) or weak
# references, once per recorded graph.
import torch


class CUDAGraphNode:
    def __init__(self, wrapped_function, recording_inputs):
        self.output_storage_alias = []
        self.outputs_weakrefs = []
        self.recording_outputs = self._record(wrapped_function.model, recording_inputs)
        self.outputs_metadata = []
        for out in self.recording_outputs:
            if isinstance(out, torch.Tensor):
                self.outputs_metadata.append(self._tensor_metadata(out))
            else:
                self.outputs_metadata.append(out)

    def _record(self, model, inputs):
        with torch.cuda.graph(self.graph):
            static_outputs = model(inputs)
        return static_outputs

    def _add_first_outputs(self, outputs):
        output_new_storages_index = {}
        for i, o in enumerate(outputs):
            if o is None or not isinstance(o, torch.Tensor):
                self.output_storage_alias.append(UnaliasedStorage)
                continue
            if o.untyped_storage().data_ptr() in output_new_storages_index:
                index = output_new_storages_index[o.untyped_storage().data_ptr()]
                self.output_storage_alias.append(AliasesNewOutput(index))
                continue
            output_new_storages_index[o.untyped_storage().data_ptr()] = i
        for out in outputs:
            if not isinstance(out, torch.Tensor):
                self.outputs_weakrefs.append(None)
            else:
                self.outputs_weakrefs.append(StorageWeakRefWrapper(out))
