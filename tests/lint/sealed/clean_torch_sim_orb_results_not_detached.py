# Source: https://github.com/TorchSim/torch-sim/pull/491, file torch_sim/models/orb.py, OrbModel
#   (after the fix b9a2ba36; docstrings cut)
# Reported: "Added .detach() calls to model outputs in fairchem, orb, metatomic, fairchem_legacy,
#   and graphpes_framework".
# Pattern: every returned prediction is detached, so what the simulation state keeps carries no
#   graph.
# Label: control: nothing here keeps GPU memory across steps
from __future__ import annotations

import traceback
import typing
import warnings
from pathlib import Path
from typing import Any

import torch

from torch_sim.elastic import voigt_6_to_full_3x3_stress
from torch_sim.models.interface import ModelInterface

class OrbModel(ModelInterface):

    def __init__(
        self,
        model: DirectForcefieldRegressor | ConservativeForcefieldRegressor | str | Path,
        *,  # force remaining arguments to be keyword-only
        conservative: bool | None = None,
        compute_stress: bool = True,
        compute_forces: bool = True,
        system_config: SystemConfig | None = None,
        max_num_neighbors: int | None = None,
        edge_method: EdgeCreationMethod | None = None,
        half_supercell: bool | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:

        super().__init__()

        resolved_device: torch.device
        if device is None:
            resolved_device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        elif isinstance(device, str):
            resolved_device = torch.device(device)
        else:
            resolved_device = device
        self._device = resolved_device

        self._dtype = dtype
        self._compute_stress = compute_stress
        self._compute_forces = compute_forces

        # Load model if path is provided
        if isinstance(model, str | Path):
            loaded_model = torch.load(model, map_location=self._device)
        elif isinstance(model, torch.nn.Module):
            loaded_model = model
        else:
            raise TypeError("Model must be a path or torch.nn.Module")

        # Set up system configuration
        self.system_config = system_config or loaded_model.system_config
        self._max_num_neighbors = max_num_neighbors
        self._edge_method = edge_method
        self._half_supercell = half_supercell
        self.conservative = conservative

        self.model = loaded_model.to(self._device)
        self.model = self.model.eval()

        if self.dtype is not None:
            self.model = self.model.to(dtype=self.dtype)

        # Determine if the model is conservative
        model_is_conservative = hasattr(self.model, "grad_forces_name")
        if self.conservative is None:
            self.conservative = model_is_conservative

        if self.conservative and not model_is_conservative:
            raise ValueError(
                "Conservative mode requested, but model is not a "
                "ConservativeForcefieldRegressor."
            )

        # Set up implemented properties
        self.implemented_properties = self.model.properties

        # Add forces and stress to implemented properties if conservative model
        if self.conservative:
            self.implemented_properties.extend(["forces", "stress"])

    def forward(self, state: SimState, **_kwargs: object) -> dict[str, torch.Tensor]:

        sim_state = state

        if sim_state.device != self._device:
            sim_state = sim_state.to(self._device)

        half_supercell = (
            torch.min(sim_state.volume) > 1000
            if self._half_supercell is None
            else self._half_supercell
        )

        # Convert state to atom graphs
        batch = state_to_atom_graphs(
            sim_state,
            system_config=self.system_config,
            max_num_neighbors=self._max_num_neighbors,
            edge_method=self._edge_method,
            half_supercell=half_supercell,
            device=self.device,
        )

        # Run forward pass
        predictions = self.model.predict(batch)

        results: dict[str, torch.Tensor] = {}
        model_has_direct_heads = (
            "forces" in self.model.heads and "stress" in self.model.heads
        )
        for prop in self.implemented_properties:
            # The model has no direct heads for forces/stress, so we skip these props.
            if not model_has_direct_heads and prop == "forces":
                continue
            if not model_has_direct_heads and prop == "stress":
                continue
            _property = "energy" if prop == "free_energy" else prop
            results[prop] = predictions[_property].detach()

        if self.conservative:
            results["forces"] = results[self.model.grad_forces_name].detach()
            results["stress"] = results[self.model.grad_stress_name].detach()

        if "stress" in results and results["stress"].shape[-1] == 6:
            # NOTE: atleast_2d needed because orb internally gets rid of the batch
            # dimension of the stress if it is 1.
            results["stress"] = voigt_6_to_full_3x3_stress(
                torch.atleast_2d(results["stress"])
            )

        return results
