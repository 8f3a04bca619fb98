# Source: https://github.com/NeuroBench/neurobench/issues/184 (fixed by commit de4ad1930fc705efc4628ad1ac1c57837dbb467d "update hook additions to bugfix memory leak"), files neurobench/benchmarks/benchmark.py, neurobench/benchmarks/hooks.py, neurobench/benchmarks/workload_metrics.py and neurobench/models/model.py (after the fix)
# Reported: "Due to the hook additions ... there seems to be memory leaks when the Benchmark is used and the model is changing. We should somehow make sure that the hooks are deleted at the end of the Benchmark run"
# Pattern: Benchmark.run registers the hooks only when a workload metric needs them and, before returning, resets and closes (handle.remove()) every activation and connection hook and empties the model's hook lists, so no hook stores activations outside a benchmark run, where model.reset_hooks() empties them after every batch.
# Label: control: nothing here keeps GPU memory across steps
# From neurobench/benchmarks/benchmark.py:
import sys
from contextlib import redirect_stdout
from tqdm import tqdm

from . import static_metrics, workload_metrics

# workload metrics which require hooks
requires_hooks = ["activation_sparsity", "number_neuron_updates", "synaptic_operations"]

class Benchmark():
    """ Top-level benchmark class for running benchmarks.
    """
    def __init__(self, model, dataloader, preprocessors, postprocessors, metric_list):
        """
        Args:
            model: A NeuroBenchModel.
            dataloader: A PyTorch DataLoader.
            preprocessors: A list of NeuroBenchPreProcessors.
            postprocessors: A list of NeuroBenchPostProcessors.
            metric_list: A list of lists of strings of metrics to run. 
                First item is static metrics, second item is data metrics.
        """

        self.model = model 
        self.dataloader = dataloader # dataloader not dataset
        self.preprocessors = preprocessors
        self.postprocessors = postprocessors

        self.static_metrics = {m: getattr(static_metrics, m) for m in metric_list[0]}
        self.workload_metrics = {m: getattr(workload_metrics, m) for m in metric_list[1]}

    def run(self, quiet=False, verbose: bool = False, 
            dataloader=None, preprocessors=None, postprocessors=None):
        """ Runs batched evaluation of the benchmark.

        Args:
            dataloader (optional): override DataLoader for this run.
            preprocessors (optional): override preprocessors for this run.
            postprocessors (optional): override postprocessors for this run.
            quiet (bool, default=False): If True, output is suppressed.
            verbose (bool, default=False): If True, metrics for each bach will be printed.
                                           If False (default), metrics are accumulated and printed after all batches are processed.

        Returns:
            results: A dictionary of results.
        """
        with redirect_stdout(None if quiet else sys.stdout):
            print("Running benchmark")

            # Static metrics
            results = {}
            for m in self.static_metrics.keys():
                results[m] = self.static_metrics[m](self.model)

            # add hooks to the model
            if any([m in requires_hooks for m in self.workload_metrics.keys()]):
                workload_metrics.detect_activations_connections(self.model)            

            dataloader = dataloader if dataloader is not None else self.dataloader
            preprocessors = preprocessors if preprocessors is not None else self.preprocessors
            postprocessors = postprocessors if postprocessors is not None else self.postprocessors

            # Init/re-init stateful data metrics
            for m in self.workload_metrics.keys():
                if isinstance(self.workload_metrics[m],type) and issubclass(self.workload_metrics[m], workload_metrics.AccumulatedMetric):
                    self.workload_metrics[m] = self.workload_metrics[m]()
                elif isinstance(self.workload_metrics[m], workload_metrics.AccumulatedMetric): # new benchmark run, reset metric state
                    self.workload_metrics[m].reset()

            dataset_len = len(dataloader.dataset)

            batch_num = 0
            for data in tqdm(dataloader, total=len(dataloader), disable=quiet):
                batch_size = data[0].size(0)

                # convert data to tuple
                if type(data) is not tuple:
                    data = tuple(data)

                # Preprocessing data
                for alg in preprocessors:
                    data = alg(data)

                # Run model on test data
                preds = self.model(data[0])

                for alg in postprocessors:
                    preds = alg(preds)

                # Data metrics
                batch_results = {}
                for m in self.workload_metrics.keys():
                    batch_results[m] = self.workload_metrics[m](self.model, preds, data)

                for m, v in batch_results.items():
                    # AccumulatedMetrics are computed after all batches complete
                    if isinstance(self.workload_metrics[m], workload_metrics.AccumulatedMetric):
                        continue
                    # otherwise accumulate via mean
                    else:
                        assert isinstance(v, float) or isinstance(v, int), "Data metric must return float or int to be accumulated"
                        if m not in results:
                            results[m] = v * batch_size / dataset_len
                        else:
                            results[m] += v * batch_size / dataset_len

                # delete hook contents
                self.model.reset_hooks()

                if verbose:
                    for m in self.workload_metrics.keys():
                        if isinstance(self.workload_metrics[m], workload_metrics.AccumulatedMetric):
                            results[m] = self.workload_metrics[m].compute()
                    print(f'\nBatch num {batch_num + 1}/{len(dataloader)}')
                    print(results)

                batch_num += 1

            # compute AccumulatedMetrics after all batches if they are not calculated at every iteration
            if not verbose:
                for m in self.workload_metrics.keys():
                    if isinstance(self.workload_metrics[m], workload_metrics.AccumulatedMetric):
                        results[m] = self.workload_metrics[m].compute()

        # close hooks
        for hook in self.model.activation_hooks:
            hook.reset()
            hook.close()
        for hook in self.model.connection_hooks:
            hook.reset()
            hook.close()
        self.model.activation_hooks = []
        self.model.connection_hooks = []

        return results


# From neurobench/benchmarks/hooks.py:
import snntorch as snn
class ActivationHook():
    """ Hook class for an activation layer in a NeuroBenchModel.

    Output of the activation layer in each forward pass will be stored.
    """

    def __init__(self, layer, connection_layer=None, prev_act_layer_hook=None):
        """ Initializes the class.
        
        A forward hook is registered for the activation layer.

        Args:
            layer: The activation layer which is a PyTorch nn.Module.
        """
        self.activation_outputs = []
        self.activation_inputs = []
        if layer is not None:
            self.hook = layer.register_forward_hook(self.hook_fn)
            self.hook_pre = layer.register_forward_pre_hook(self.pre_hook_fn)
        else:
            self.hook = None
            self.hook_pre = None

        self.layer = layer # the activation layer
  
        # Check if the layer is a spiking layer (SpikingNeuron is the superclass of all snnTorch spiking layers)
        self.spiking = isinstance(layer, snn.SpikingNeuron)

    def pre_hook_fn(self, layer, input):
        """Hook function that will be called before each forward pass of 
        the activation layer.

        Each input of the activation layer will be stored. 

        Args:
            layer: The registered layer 
            input: Input of the registered layer
        """
        self.activation_inputs.append(input)

    def hook_fn(self, layer, input, output):
        """Hook function that will be called after each forward pass of 
        the activation layer.

        Each output of the activation layer will be stored. 

        Args:
            layer: The registered layer 
            input: Input of the registered layer
            output: Output of the registered layer
        """
        if self.spiking:
            self.activation_outputs.append(output[0])
            

        else:
            self.activation_outputs.append(output)
    def empty_hook(self):
        """Deletes the contents of the hooks, but keeps the hook registered.
        """
        self.activation_outputs = []
        self.activation_inputs = []

    def reset(self):
        """ Resets the stored activation outputs and inputs
        """
        self.activation_outputs = []
        self.activation_inputs = []

    def close(self):
        """ Remove the registered hook.
        """
        if self.hook:
            self.hook.remove()
        if self.hook_pre:
            self.hook_pre.remove()

class LayerHook():
    def __init__(self, layer) -> None:
        self.layer = layer 
        self.inputs = []
        if layer is not None:
            self.hook = layer.register_forward_pre_hook(self.hook_fn)
        else:
            self.hook = None

    def hook_fn(self, module, input):
        self.inputs.append(input)

    def register_hook(self):
        self.hook = self.layer.register_forward_pre_hook(self.hook_fn)

    def reset(self):
        self.inputs = []

    def close(self):
        if self.hook:
            self.hook.remove()


# From neurobench/benchmarks/workload_metrics.py:
import torch
import numpy as np
from ..utils import check_shape, make_binary_copy, single_layer_MACs
from .hooks import ActivationHook, LayerHook

class AccumulatedMetric:
    """ Abstract class for a metric which must save state between batches.
    """

    def __init__(self):
        """ Initialize metric.
        """
        raise NotImplementedError("Subclasses of AccumulatedMetric should implement __init__")
    
    def __call__(self, model, preds, data):
        """ Process this batch of data.

        Args:
            model: A NeuroBenchModel.
            preds: A torch tensor of model predictions.
            data: A tuple of data and labels.
        Returns:
            result: the accumulated metric as of this batch.
        """
        raise NotImplementedError("Subclasses of AccumulatedMetric should implement __call__")

    def compute(self):
        """ Compute the metric score using all accumulated data.

        Returns:
            result: the final accumulated metric.
        """
        raise NotImplementedError("Subclasses of AccumulatedMetric should implement compute")

    def reset(self):
        """ Reset the metric state.

        This is called when the benchmark is run again, e.g. on the FSCIL task the benchmark
            is run at the end of each session.
        """
        raise NotImplementedError("Subclasses of AccumulatedMetric should implement reset")


# dynamic metrics, require model, model predictions, and labels

def detect_activations_connections(model):
    """Register hooks or other operations that should be called before running a benchmark.
    """
    for hook in model.activation_hooks:
        hook.reset()
        hook.close()
    for hook in model.connection_hooks:
        hook.reset()
        hook.close()
    model.activation_hooks = []
    model.connection_hooks = []
    
    supported_layers = model.supported_layers
    
    # recurrent_supported_layers = (torch.nn.RNNBase)
    # recurr_cell_supported_layers = (torch.nn.RNNCellBase)

    act_layers = model.activation_layers()
    # Registered activation hooks
    for layer in act_layers:
        model.activation_hooks.append(ActivationHook(layer))

    con_layers = model.connection_layers()
    for flat_layer in con_layers:
        if isinstance(flat_layer, supported_layers):
            model.connection_hooks.append(LayerHook(flat_layer))

    

# (... cut)

# From neurobench/models/model.py:
from torch import nn
import torch
from neurobench.benchmarks.hooks import ActivationHook

from neurobench.utils import activation_modules


class NeuroBenchModel:
    """ Abstract class for NeuroBench models. Individual model frameworks are
    responsible for defining model inference.
    """

    def __init__(self, net):
        """ Init using a trained network
        
        Args:
            net: A trained network
        """
        self.activation_modules = activation_modules()
        self.activation_hooks = []
        self.connection_hooks = []
        self.first_layer = None

        self.supported_layers = (torch.nn.Linear, torch.nn.Conv2d, torch.nn.Conv1d, 
                        torch.nn.Conv3d, torch.nn.RNNBase, torch.nn.RNNCellBase,)

    # (... cut)

    def reset_hooks(self):
        """ Resets all the hooks (activation hooks and connection hooks)
        """
        for hook in self.activation_hooks:
            hook.reset()

        for hook in self.connection_hooks:
            hook.reset()
