# Source: https://github.com/deepchecks/deepchecks/pull/1341 (commit e679b25bb62cb4516128c79d7469035b4d6f8561), file deepchecks/vision/checks/performance/image_segment_performance.py (before the fix)
# Reported: "having tensors with grads cached caused major memory leak" (closes issue #1148)
# Pattern: update() runs once per batch and extends self._state['samples_for_binning'] (through the local alias samples_for_bin) with (label, prediction, properties) tuples whose predictions still carry the model's graph; up to number_of_samples_to_infer_bins are cached across batches.
# Label: lines marked `# leak` keep the memory
"""Module of segment performance check."""
import math
import typing as t
from collections import defaultdict, Counter

import numpy as np
import pandas as pd
import torch
from ignite.metrics import Metric
import plotly.express as px

from deepchecks import ConditionResult
from deepchecks.core import DatasetKind, CheckResult
from deepchecks.core.condition import ConditionCategory
from deepchecks.utils import plot
from deepchecks.utils.strings import format_number, format_percent
from deepchecks.vision import SingleDatasetCheck, Context, Batch
from deepchecks.vision.utils.image_properties import default_image_properties, validate_properties
from deepchecks.vision.metrics_utils import get_scorers_list, metric_results_to_df


__all__ = ['ImageSegmentPerformance']


class ImageSegmentPerformance(SingleDatasetCheck):
    """Segment the data by various properties of the image, and compare the performance of the segments.

    Parameters
    ----------
    image_properties : List[Dict[str, Any]], default: None
        List of properties. Replaces the default deepchecks properties.
        Each property is dictionary with keys 'name' (str), 'method' (Callable) and 'output_type' (str),
        representing attributes of said method. 'output_type' must be one of 'continuous'/'discrete'
    alternative_metrics : Dict[str, Metric], default: None
        A dictionary of metrics, where the key is the metric name and the value is an ignite.Metric object whose score
        should be used. If None are given, use the default metrics.
    number_of_bins: int, default : 5
        Maximum number of bins to segment a single property into.
    number_of_samples_to_infer_bins : int, default : 1000
        Minimum number of samples to use to infer the bounds of the segments' bins
    n_show_top : int , default: 3
        number of properties to show (shows by top diffrence by first metric)
    """

    def __init__(
        self,
        image_properties: t.List[t.Dict[str, t.Any]] = None,
        alternative_metrics: t.Optional[t.Dict[str, Metric]] = None,
        number_of_bins: int = 5,
        number_of_samples_to_infer_bins: int = 1000,
        n_to_show: int = 3,
        **kwargs
    ):
        super().__init__(**kwargs)
        if image_properties:
            validate_properties(image_properties)
            self.image_properties = image_properties
        else:
            self.image_properties = default_image_properties

        self.alternative_metrics = alternative_metrics
        self.number_of_bins = number_of_bins
        self.n_to_show = n_to_show
        self.number_of_samples_to_infer_bins = number_of_samples_to_infer_bins
        self._state = None

    def initialize_run(self, context: Context, dataset_kind: DatasetKind):
        """Initialize run before starting updating on batches."""
        # First we will aggregate samples up to defined amount (number_of_samples_to_infer_bins), when we reach
        # the amount we will define the bins and populate them
        self._state = {'samples_for_binning': [], 'bins': None}

    def update(self, context: Context, batch: Batch, dataset_kind: DatasetKind):
        """Update the bins by the image properties."""
        images = batch.images
        predictions = batch.predictions
        labels = batch.labels

        samples_for_bin: t.List = self._state['samples_for_binning']
        bins = self._state['bins']

        # Initialize a list of all properties per image sample
        batch_properties = [{} for _ in range(len(images))]
        for single_property in self.image_properties:
            for index, image_result in enumerate(single_property['method'](images)):
                batch_properties[index][single_property['name']] = image_result

        batch_data = zip(labels, predictions, batch_properties)
        # If we already defined bins, add the current data to them
        if bins is not None:
            _divide_to_bins(bins, list(batch_data))
        else:
            # Add the current data to the samples list
            samples_for_bin.extend(batch_data)  # leak
            # Check if enough data to infer bins
            if len(samples_for_bin) >= self.number_of_samples_to_infer_bins:
                # Create the bins and metrics, and divide all cached data into the bins
                self._state['bins'] = self._create_bins_and_metrics(samples_for_bin,
                                                                    context.get_data_by_kind(dataset_kind))
                # Remove the samples cache which are no longer needed (free the memory)
                del samples_for_bin

    # (compute cut)

    def _create_bins_and_metrics(self, batch_data: t.List[t.Tuple], dataset):
        """Return dict of bins for each property in format \
        {property_name: [{start: val, stop: val, count: x, metrics: {name: metric...}}, ...], ...}."""
        # For X bins we need to have (X - 1) quantile bounds (open bounds from left and right)
        quantiles = np.linspace(1 / self.number_of_bins, 1, self.number_of_bins - 1, endpoint=False)
        # Calculate for each property the quantile values
        batch_properties = [b[2] for b in batch_data]
        df = pd.DataFrame(batch_properties)
        bins = {}
        for prop in df.columns:
            # Filter nan values
            property_col = df[~df[prop].isnull()][prop]
            # If all values of the property are nan, then doesn't display it
            # TODO: how to handle if only some of the values are nan?
            if len(property_col) == 0:
                continue
            # Get quantiles without duplicates
            quantile_values = list(set(df[prop].quantile(quantiles).tolist()))
            bins[prop] = [{'start': start, 'stop': stop, 'count': 0,
                          'metrics': get_scorers_list(dataset, self.alternative_metrics)}
                          for start, stop in _create_open_bins_ranges(quantile_values)]

        # Divide the data into the bins
        _divide_to_bins(bins, batch_data)
        return bins

    # (conditions cut)

def _divide_to_bins(bins, batch_data: t.List[t.Tuple]):
    """Iterate the data and enter it into the appropriate bins."""
    for property_name, bins_values in bins.items():
        for label, prediction, properties in batch_data:
            _add_to_fitting_bin(bins_values, properties[property_name], label, prediction)


def _create_open_bins_ranges(quantiles):
    """Return quantiles with start and stop as list of tuples [(-Inf, x1),(x1,x2),(x2, Inf)]."""
    quantiles = sorted(quantiles)
    return zip(([-np.Inf] + quantiles), (quantiles + [np.Inf]))


def _add_to_fitting_bin(bins: t.List[t.Dict], property_value, label, prediction):
    """Find the fitting bin from the list of bins for a given value. Then increase the count and the prediction and \
    label to the metrics objects."""
    if property_value is None:
        return
    for single_bin in bins:
        if single_bin['start'] <= property_value < single_bin['stop']:
            single_bin['count'] += 1
            for metric in single_bin['metrics'].values():
                # Since this is a single prediction and label need to wrap in tensor/label, in order to pass the
                # expected shape to the metric
                metric.update((_wrap_torch_or_list(prediction), _wrap_torch_or_list(label)))
            return


def _wrap_torch_or_list(value):
    """Unsqueeze the value if it is a tensor or wrap in list otherwise."""
    if isinstance(value, torch.Tensor):
        return torch.unsqueeze(value, 0)
    return [value]


