# Source: https://github.com/growingnet/gromo/pull/138 (merge commit 618376a1b1a9ffe6ccfe6bc461afefd68780a3ff; issues #135 and #137), files src/gromo/utils/tensor_statistic.py and src/gromo/modules/growing_module.py (after the fix)
# Reported: issue #135: "A `.detach()` is missing in `MergeGrowingModule.forward` ... We do not detach `self.activity`. This will create a memory leak."; PR #138: "Fix memory leak in tensor updates"
# Pattern: TensorStatistic.update runs under @torch.no_grad() and MergeGrowingModule.forward stores y.detach() in self.activity, so neither keeps a graph across batches.
# Label: control: nothing here keeps GPU memory across steps

# From src/gromo/utils/tensor_statistic.py:
from typing import Any, Callable

import numpy as np
import torch

from gromo.utils.utils import global_device


class TensorStatistic:
    """
    Class to store a tensor statistic and update it with a given function.
    A tensor statistic is a tensor that is an average of a given tensor over
    multiple samples. It is typically computed by batch.

    When computing the new source data, the tensor statistic should be
    informed that it is not updated. Then The update function should be called
    to update the tensor statistic.

    Example:
        We want to compute the average of a set of tensors of shape (2, 3) in data
        loader `data_loader`. We can use the following code:

            ```python
            data = torch.zeros(2, 3)
            tensor_statistic = TensorStatistic(
                shape=(2, 3),
                update_function=lambda: (data.sum(dim=0), data.size(0)),
                name="Average",
            )
            for data_batch in data_loader:
                data = data_batch
                tensor_statistic.updated = False
                tensor_statistic.update()

            print(tensor_statistic())
            ```
    """

    def __init__(
        self,
        shape: tuple[int, ...] | None,
        update_function: (
            Callable[[Any], tuple[torch.Tensor, int]]
            | Callable[[], tuple[torch.Tensor, int]]
        ),
        device: torch.device | str | None = None,
        name: str | None = None,
    ) -> None:
        """
        Initialise the tensor information.

        Parameters
        ----------
        shape: tuple[int, ...] | None
            shape of the tensor to compute, if None use the shape of the first update
        update_function: Callable[[Any], tuple[torch.Tensor, int]]
            function to update the tensor
        name: str
            used for debugging
        """
        assert shape is None or all(
            i >= 0 and isinstance(i, (int, np.int64)) for i in shape  # type: ignore
        ), f"The shape must be a tuple of positive integers. {type(shape)}, {shape}"
        self._shape = shape
        self._update_function = update_function
        self.name = name if name is not None else "TensorStatistic"
        self._tensor: torch.Tensor | None = None
        self.samples = 0
        self.updated = True
        self.device = device if device else global_device()

    def __str__(self):
        return f"{self.name} tensor of shape {self._shape} with {self.samples} samples"

    @torch.no_grad()
    def update(self, **kwargs):
        assert (
            not self._shape or self._tensor is not None
        ), f"The tensor statistic {self.name} has not been initialized."
        if self.updated is False:
            update, nb_sample = self._update_function(**kwargs)
            if self._tensor is not None:
                assert update.size() == self._tensor.size(), (
                    f"The update tensor has a different size than the tensor statistic {self.name}"
                    f" {update.size()=}, {self._tensor.size()=}"
                )
                self._tensor += update
            else:
                assert (
                    self._shape is None
                ), "If self._shape is not None, self_.tensor should be initialised in init"
                self._tensor = update
            self.samples += nb_sample
            self.updated = True

    def init(self):
        if self._shape is None:
            self._tensor = None
        else:
            self._tensor = torch.zeros(self._shape, device=self.device)
        self.samples = 0

    def reset(self):
        self._tensor = None
        self.samples = 0

    def __call__(self):
        if self.samples == 0:
            raise ValueError("The tensor statistic has not been computed.")
        else:
            assert (
                self._tensor is not None
            ), f"If the number of samples is not zero the tensor should not be None."
            return self._tensor / self.samples

# From src/gromo/modules/growing_module.py:
from gromo.utils.tools import compute_optimal_added_parameters, optimal_delta
from gromo.utils.utils import get_correct_device


class MergeGrowingModule(torch.nn.Module):
    """
    Module to connect multiple modules with an merge operation.
    This module does not perform the merge operation, it is done by the user.
    """

    def __init__(
        self,
        post_merge_function: torch.nn.Module = torch.nn.Identity(),
        previous_modules: list["MergeGrowingModule | GrowingModule"] = None,
        next_modules: list["MergeGrowingModule | GrowingModule"] = None,
        allow_growing: bool = False,
        tensor_s_shape: tuple[int, int] = None,
        device: torch.device | None = None,
        name: str = None,
    ) -> None:

        super(MergeGrowingModule, self).__init__()
        self._name = name
        self.name = (
            self.__class__.__name__
            if name is None
            else f"{self.__class__.__name__}({name})"
        )
        self._config_data, _ = load_config()
        self.device = get_correct_device(self, device)

        self.post_merge_function: torch.nn.Module = post_merge_function
        if self.post_merge_function:
            self.post_merge_function = self.post_merge_function.to(self.device)
        self._allow_growing = allow_growing

        self.store_input = 0
        self.input = None

        self.store_activity = 0
        self.activity = None

        self.tensor_s = TensorStatistic(
            tensor_s_shape,
            update_function=self.compute_s_update,
            device=self.device,
            name=f"S({self.name})",
        )

        self.previous_tensor_s: TensorStatistic | None = None
        self.previous_tensor_m: TensorStatistic | None = None

        self.previous_modules: list[MergeGrowingModule | GrowingModule] = []
        self.set_previous_modules(previous_modules)
        self.next_modules: list[MergeGrowingModule | GrowingModule] = []
        self.set_next_modules(next_modules)

    @property
    # (graph-building helpers cut)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for t in (self.tensor_s, self.previous_tensor_s, self.previous_tensor_m):
            if t:
                t.updated = False

        if self.store_input > 0:
            self.input = x
            self.input.retain_grad()

        if self.post_merge_function and (x is not None):
            y = self.post_merge_function(x)
        else:
            y = x

        if self.store_activity > 0:
            self.activity = y.detach()
            self.tensor_s.updated = False  # reset the update flag

        return y

    @property
    def pre_activity(self):
        return self.input

    def projected_v_goal(self) -> torch.Tensor:
        """
        Compute the projected gradient of the goal with respect to the activity of the layer.

        dLoss/dA_proj := dLoss/dA - dW B[-1] where A is the pre-activation vector of the
        layer, and dW the optimal delta for all the previous layers

        Returns
        -------
        torch.Tensor
            projected gradient of the goal with respect to the activity of the next layer
            dLoss/dA - dW B[-1]
        """
        v_proj = self.pre_activity.grad.clone().detach()
        for module in self.previous_modules:
            v_proj -= module.optimal_delta_layer(module.input)

        return v_proj

    def compute_s_update(self) -> tuple[torch.Tensor, int]:
        """
        Compute the update of the tensor S. Should be added to the type of layer.

        Returns
        -------
        torch.Tensor
            update of the tensor S
        int
            number of samples used to compute the update
        """
        raise NotImplementedError

    def compute_previous_s_update(self) -> tuple[torch.Tensor, int]:
        """
        Compute the update of the tensor S for the input of all previous modules.

        Returns
        -------
        torch.Tensor
            update of the tensor S
        int
            number of samples used to compute the update
        """
        raise NotImplementedError

    def compute_previous_m_update(self) -> tuple[torch.Tensor, int]:
        """
        Compute the update of the tensor M for the input of all previous modules.

        Returns
        -------
        torch.Tensor
            update of the tensor M
        int
            number of samples used to compute the update
        """
        raise NotImplementedError

    def init_computation(self) -> None:
        """
        Initialize the computation of the optimal added parameters.
        """
        self.store_input = True
        self.store_activity = True
        for module in self.previous_modules:
            module.store_input = True
        self.tensor_s.init()
        if self.previous_tensor_s is not None:
            self.previous_tensor_s.init()
        if self.previous_tensor_m is not None:
            self.previous_tensor_m.init()

    def update_computation(self) -> None:
        """
        Update the computation of the optimal added parameters.
        """
        self.tensor_s.update()
        if self.previous_tensor_s is not None:
            self.previous_tensor_s.update()
        if self.previous_tensor_m is not None:
            self.previous_tensor_m.update()

    def reset_computation(self) -> None:
        """
        Reset the computation of the optimal added parameters.
        """
        self.store_input = False
        self.store_activity = False
        for module in self.previous_modules:
            module.store_input = False
        self.tensor_s.reset()
        if self.previous_tensor_s is not None:
            self.previous_tensor_s.reset()
        if self.previous_tensor_m is not None:
            self.previous_tensor_m.reset()

