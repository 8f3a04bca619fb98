# Source: https://github.com/eora-ai/torchok/pull/166 (commit 6f58203f11807597e8d3654b6d4bf7b449088bbf "fix memory leak", merged as 6be6df0), files torchok/metrics/index_base_metric.py and torchok/metrics/representation_torchmetrics.py (before the fix)
# Reported: PR "fix memory leak" (branch fix-representation-memory-leak): the fix adds TorchMetricBaseMetr.reset(), which also resets self.metric_func
# Pattern: TorchMetricBaseMetr keeps a torchmetrics retrieval metric (RetrievalMAP and the like, whose states are lists of preds, target and indexes) in self.metric_func and calls it on every search batch in IndexBasedMeter.compute(); the meter's own reset() (torchmetrics Metric.reset) empties the meter's vector lists but never self.metric_func, so the inner metric's lists grow at every validation epoch of the run (CPU tensors here: preds come from FAISS numpy scores).
# Label: lines marked `# leak` keep the memory
# From torchok/metrics/index_base_metric.py:
import math
from abc import ABC
from enum import Enum
from typing import Callable, Generator, List, Optional, Tuple, Union

import faiss
import numpy as np
import pandas as pd
import torch
from sklearn.preprocessing import normalize
from torchmetrics import Metric


class DatasetType(Enum):
    CLASSIFICATION = 'classification'
    REPRESENTATION = 'representation'


class MetricDistance(Enum):
    IP = 'IP'
    L2 = 'L2'


dataset_enum_mapping = {
    'classification': DatasetType.CLASSIFICATION,
    'representation': DatasetType.REPRESENTATION,
}

distance_enum_mapping = {
    'IP': MetricDistance.IP,
    'L2': MetricDistance.L2
}


class IndexBasedMeter(Metric, ABC):
    """Base class for representation metrics.

    Store retrieval vectors and targets during phase in update method. FAISS library is used to build an index
    and search for top-k in it. Supports 2 datasets: classification dataset with targets,
    and representation dataset with scores and queries_idxs tensors.
    Compute method return generator with relevant and closest (FAISS searched) indexes. The relevant index contain
    its relevant index with scores for current query. And the closest contain the closest index with its distance.
    """
    full_state_update: bool = False

    def __init__(self, exact_index: bool, dataset_type: str, metric_distance: str,
                 metric_func: Callable, k_as_target_len: bool = False, k: Optional[int] = None,
                 use_batching_search: bool = True, search_batch_size: Optional[int] = None,
                 normalize_vectors: bool = False, group_averaging: bool = False, raise_empty_query: bool = True,
                 **kwargs):
        """Initialize IndexBasedMeter.

        Args:
            exact_index: If true then build fair inner product or Euclidean index (depends on the metric chosen),
                otherwise the index will be an approximate nearest neighbors search index.
            dataset_type: Dataset type (classification or representation), which will be used to calculate metric.
            metric_distance: Metric distance (IP - cosine distance, L2 - euclidean), which will be used to build
                FAISS index.
            metric_func: Representation metric (e.g. ranx metric function) with the follow backend
                `def metric_func(
                    qrels: Union[np.ndarray, numba.typed.List],
                    run: Union[np.ndarray, numba.typed.List],
                    k: int = 0,
                ) -> np.ndarray`
                where qrels - y_true and run - y_pred
                see https://github.com/AmenRa/ranx/blob/ccab1549de81e7366e34213c86089e965db55f72/ranx/metrics.py
                for more details.
            k_as_target_len: If true will be search with different top k, where these different k is the length of each
                uniq target vectors. If true parameter k will be not use.
            k: Number of top closest indexes to get. If k_as_target_len is true this value will not be used.
            use_batching_search: If true will do one request at a time for every query and if `group_averaging`
                parameter is true will do one request at a time for each group. Otherwise, will use batch for each
                query request.
            search_batch_size: The size for one FAISS search request, default = num CPUs.
            normalize_vectors: If true vectors will be normalized, otherwise no.
            group_averaging: If true compute metric averaging by the targets.
            raise_empty_query: If true raise in case when dataset has query without relevants.

        Raises:
            ValueError: If metric or dataset is not correct write.
        """
        super().__init__(**kwargs)
        self.exact_index = exact_index

        self.dataset_type = dataset_enum_mapping[dataset_type]
        self.metric_distance = distance_enum_mapping[metric_distance]
        self.metric_func = metric_func
        self.normalize_vectors = normalize_vectors
        self.group_averaging = group_averaging
        self.k_as_target_len = k_as_target_len
        self.use_batching_search = use_batching_search
        self.raise_empty_query = raise_empty_query
        # set search_batch_size as num CPUs if search_batch_size is None
        self.search_batch_size = torch.get_num_threads() if search_batch_size is None else search_batch_size

        # set k as 1 if k is None
        k = 1 if k is None else k
        # as queries vectors can be relevant to other query vectors, so we should search k + 1 and delete first
        # and remove the first found vector because it would be a query
        self.search_k = k + 1
        # but in metric compute study, k must not change
        self.metric_compute_k = k

        self.add_state('vectors', default=[], dist_reduce_fx=None)
        if self.dataset_type == DatasetType.CLASSIFICATION:
            # if classification dataset
            self.add_state('group_labels', default=[], dist_reduce_fx=None)
        else:
            # if representation dataset
            self.add_state('query_idxs', default=[], dist_reduce_fx=None)
            self.add_state('scores', default=[], dist_reduce_fx=None)
            self.add_state('group_labels', default=[], dist_reduce_fx=None)

    def update(self, vectors: torch.Tensor, group_labels: Optional[torch.Tensor] = None,
               query_idxs: Optional[torch.Tensor] = None, scores: Optional[torch.Tensor] = None):
        """Append tensors in storage.

        Args:
            vectors: Often it would be embeddings, size (batch_size, embedding_size).
            group_labels: The labels for every vector in classification mode, size (batch_size).
            query_idxs: Integer tensor where values >= 0 represent indices of queries with corresponding
                vectors in vectors tensor and value -1 indicates that the corresponding vector isn't a query.
            scores: The score tensor, see representation dataset for more information,
                size (batch_size, total_num_queries).

        Raises:
            ValueError: If dataset is of classification type and targets is None, or if dataset is of representation
                type and at least one of scores or query_idxs is None.
        """
        vectors = vectors.detach().cpu()
        self.vectors.append(vectors)
        if self.dataset_type == DatasetType.CLASSIFICATION:
            if group_labels is None:
                raise ValueError("In classification dataset group_labels must be not None.")
            group_labels = group_labels.detach().cpu()
            self.group_labels.append(group_labels)
        else:
            if query_idxs is None:
                raise ValueError("In representation dataset query_numbers must be not None.")
            if scores is None:
                raise ValueError("In representation dataset scores must be not None")

            query_idxs = query_idxs.detach().cpu()
            self.query_idxs.append(query_idxs)

            scores = scores.detach().cpu()
            self.scores.append(scores)

            group_labels = group_labels.detach().cpu()
            self.group_labels.append(group_labels)

    def compute(self) -> float:
        """Compute metric value.

        Firstly it gathers all tensors in storage (done by torchmetrics).
        Then it prepares data, separates query and database vectors.
        Then it builds the FAISS index.
        Then, it creates a generator of relevant and closest arrays.
        Finally, it compute metric.

        Returns:
            metric: Metric value.
        """
        vectors = torch.cat(self.vectors).numpy()
        if self.normalize_vectors:
            vectors = normalize(vectors)

        if self.dataset_type == DatasetType.CLASSIFICATION:
            # if classification dataset
            group_labels = torch.cat(self.group_labels).numpy()
            # prepare data
            relevant_idxs, faiss_vector_idxs, \
                query_row_idxs, query_as_relevant = self.prepare_classification_data(group_labels)
            # mock scores and query column indexes because it belongs to representation data
            scores = None
            query_column_idxs = None
        else:
            # if representation dataset
            scores = torch.cat(self.scores).numpy()
            query_idxs = torch.cat(self.query_idxs).numpy()
            group_labels = torch.cat(self.group_labels).numpy()
            # prepare data
            relevant_idxs, faiss_vector_idxs, query_column_idxs, \
                query_row_idxs, query_as_relevant = self.prepare_representation_data(query_idxs, scores)

        # build index
        vectors = vectors.astype(np.float32)
        index = self.build_index(vectors[faiss_vector_idxs])

        # split query by group_label if metric compute target averaging
        if self.group_averaging:
            uniq_group_labels = np.unique(group_labels)
            group_indexes_split = np.array([np.where(group_labels == label)[0] for label in uniq_group_labels])
        else:
            group_indexes_split = np.arange(len(group_labels))[None]

        # compute metric
        metric = []
        for group_indexes in group_indexes_split:
            curr_target_metric = 0
            query_target_idxs = np.isin(query_row_idxs, group_indexes)
            curr_query_col_idxs = None if query_column_idxs is None else query_column_idxs[query_target_idxs]
            curr_relevant_idxs = relevant_idxs[query_target_idxs]
            curr_query_row_idxs = query_row_idxs[query_target_idxs]
            curr_query_as_relevant = query_as_relevant[query_target_idxs]

            if self.k_as_target_len:
                # + 1 because query can be in index
                # and - count of queries which are not in index
                k = len(group_indexes) + 1 - len(np.where(~curr_query_as_relevant)[0])
            else:
                k = self.search_k

            # create relevant, closest generator
            generator = self.query_generator(index, vectors, curr_relevant_idxs,
                                             curr_query_row_idxs, faiss_vector_idxs,
                                             curr_query_as_relevant, k,
                                             scores, curr_query_col_idxs)
            for batch_size, args in generator:
                curr_target_metric += batch_size * self.metric_func(*args).mean()  # leak

            curr_target_metric /= len(curr_query_row_idxs)
            metric.append(curr_target_metric)

        metric = float(np.mean(metric))
        return metric

    # (... cut)

    def query_generator(self, index: Union[faiss.IndexFlatIP, faiss.IndexFlatL2],
                        vectors: np.ndarray, relevants_idxs: np.ndarray,
                        query_row_idxs: np.ndarray, faiss_vector_idxs: np.ndarray, query_as_relevant: np.ndarray,
                        k: int, scores: Optional[np.ndarray] = None, query_col_idxs: Optional[np.ndarray] = None
                        ) -> Generator[Tuple[int, List], None, None]:
        """Create inputs *args for metric function, by faiss index search.

        This function use self.search_batch_size to define how many vectors to send per one faiss search request in
        case when self.use_batch_searching = True.
        If self.use_batch_searching is False will do one faiss search request.

        Need to know, that query_row_idxs, query_col_idxs and query_as_relevant - have the same size, and for i-th
        query element the following information is available:
            query_row_idxs[i] - index to get embedding vector in vectors storage
            query_col_idxs[i] - column index in scores matrix, need to get score value for every relevant (used in NDCG)
            query_as_relevant[i] - whether the query in relevant i.e. in gallery data, need to remove first element in
                retrieved indexes if it true, and last element if it false (because in fact, k + 1 search request is
                being made)

        Args:
            index: Faiss database built index.
            vectors: All embedding vectors, it contains gallery and queries vectors.
            relevants_idxs: Array of relevant indexes for every query, index belong vectors storage.
            query_row_idxs: Array of query indexes in vectors storage.
            faiss_vector_idxs: Array of indexes in vectors storage which is in faiss index.
            query_as_relevant: Boolean array of indexes which indicates if query is in relevant set,
                i.e. belong to queries and gallery simultaneously.
            k: Number of top closest indexes to get.
            scores: Array of scores.
            query_col_idxs: Array of query row indexes which are in relevant, i.e. belong to queries and
                gallery simultaneously.

        Returns:
            Generator which contain current batch value and self.process_data_for_metric_func output.

            batch value - current batch value.
            metric_input_list - self.process_data_for_metric_func output.
        """
        search_batch_size = self.search_batch_size if self.use_batching_search else len(query_row_idxs)
        for i in range(0, len(query_row_idxs), search_batch_size):
            batch_idxs = np.arange(i, min(i + search_batch_size, len(query_row_idxs)))

            batch_query_as_relevant = query_as_relevant[batch_idxs]
            batch_query_row_idxs = query_row_idxs[batch_idxs]
            batch_relevants_idxs = relevants_idxs[batch_idxs]
            if scores is None or query_col_idxs is None:
                batch_query_col_idxs = None
            else:
                batch_query_col_idxs = query_col_idxs[batch_idxs]

            # queries_idxs - indexes of vectors (global indexes), so queries vectors can be obtained
            # like vectors[queries_idxs[batch_idxs]]
            batch_closest_scores, local_closest_idxs = index.search(vectors[batch_query_row_idxs], k=k)

            # get global indexes
            batch_closest_idxs = faiss_vector_idxs[local_closest_idxs]

            # remove first element from faiss output if query in faiss index and remove last element
            # because k + 1 element searched
            batch_closest_scores = self.clear_faiss_output(batch_closest_scores, batch_query_as_relevant)
            batch_closest_idxs = self.clear_faiss_output(batch_closest_idxs, batch_query_as_relevant)

            metric_input_list = self.process_data_for_metric_func(closest_scores=batch_closest_scores,
                                                                  closest_idxs=batch_closest_idxs,
                                                                  relevants_idxs=batch_relevants_idxs,
                                                                  query_col_idxs=batch_query_col_idxs,
                                                                  scores=scores, k=k)
            yield len(batch_idxs), list(metric_input_list)

    # (... cut)

# From torchok/metrics/representation_torchmetrics.py:
from typing import List, Optional, Any, Dict

import numpy as np
import torch
from torchmetrics import (RetrievalFallOut, RetrievalHitRate, RetrievalMAP, RetrievalMRR, RetrievalNormalizedDCG,
                          RetrievalPrecision, RetrievalPrecisionRecallCurve, RetrievalRPrecision, RetrievalRecall)

from torchok.constructor import METRICS
from torchok.metrics.index_base_metric import IndexBasedMeter

__all__ = [
    'RetrievalFallOutMeter',
    'RetrievalHitRateMeter',
    'RetrievalMAPMeter',
    'RetrievalMRRMeter',
    'RetrievalNormalizedDCGMeter',
    'RetrievalPrecisionMeter',
    'RetrievalPrecisionRecallCurveMeter',
    'RetrievalRPrecisionMeter',
    'RetrievalRecallMeter'
]


class TorchMetricBaseMetr(IndexBasedMeter):
    def __init__(self, exact_index: bool, dataset_type: str, metric_distance: str,
                 metric_class: type, metric_params: Optional[Dict[str, Any]] = None,
                 k: Optional[int] = None, search_batch_size: Optional[int] = None, normalize_vectors: bool = False,
                 target_averaging: bool = False, k_as_target_len: bool = False, use_batching_search: bool = True,
                 group_averaging: bool = False, raise_empty_query: bool = True, **kwargs):
        metric_params = metric_params if metric_params is not None else dict()
        metric_func = metric_class(**metric_params)
        super().__init__(exact_index=exact_index, dataset_type=dataset_type, metric_distance=metric_distance,
                         metric_func=metric_func, k=k, search_batch_size=search_batch_size,
                         normalize_vectors=normalize_vectors, target_averaging=target_averaging,
                         k_as_target_len=k_as_target_len, use_batching_search=use_batching_search,
                         group_averaging=group_averaging, raise_empty_query=raise_empty_query, **kwargs)

    def process_data_for_metric_func(self, closest_scores: np.ndarray, closest_idxs: np.ndarray,
                                     relevants_idxs: np.ndarray, query_col_idxs: np.ndarray,
                                     scores: np.ndarray, k: int) -> List:
        preds = torch.tensor(closest_scores)
        target = torch.tensor([np.isin(closest_idxs[i], relevants_idxs[i]) for i in range(len(closest_idxs))],
                              dtype=torch.long)
        if self.use_batching_search:
            indexes = torch.tile(torch.arange(len(target), dtype=torch.long)[:, None], (1, target.shape[1]))
        else:
            indexes = torch.zeros_like(target, dtype=torch.long)
        return [preds, target, indexes]


@METRICS.register_class
class RetrievalFallOutMeter(TorchMetricBaseMetr):
    def __init__(self, dataset_type: str, metric_params: Optional[Dict[str, Any]] = None,
                 exact_index: bool = True, metric_distance: str = 'IP', k: Optional[int] = None,
                 search_batch_size: Optional[int] = None, normalize_vectors: bool = False,
                 target_averaging: bool = False, k_as_target_len: bool = False, use_batching_search: bool = True,
                 group_averaging: bool = False, raise_empty_query: bool = True, **kwargs):
        super().__init__(exact_index=exact_index, dataset_type=dataset_type, metric_distance=metric_distance,
                         metric_class=RetrievalFallOut, metric_params=metric_params,
                         k=k, search_batch_size=search_batch_size,
                         normalize_vectors=normalize_vectors, target_averaging=target_averaging,
                         k_as_target_len=k_as_target_len, use_batching_search=use_batching_search,
                         group_averaging=group_averaging, raise_empty_query=raise_empty_query, **kwargs)


# (... cut)
