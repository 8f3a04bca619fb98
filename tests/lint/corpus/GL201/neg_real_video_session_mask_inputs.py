# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/models/sam3_video/modeling_sam3_video.py
# (Sam3VideoInferenceSession.add_mask_inputs and remove_mask_inputs), shortened. Clean:
# the mask prompts a user gives per object and frame are the session's state; the
# session removes them (`.pop(frame_idx)`) and is dropped with the video.
import torch


class Sam3VideoInferenceSession:
    def __init__(self, inference_device="cuda", dtype=torch.float32):
        self.inference_device = inference_device
        self.dtype = dtype
        self.mask_inputs_per_obj = {}

    def obj_id_to_idx(self, obj_id):
        obj_idx = len(self.mask_inputs_per_obj)
        self.mask_inputs_per_obj[obj_idx] = {}
        return obj_idx

    def add_mask_inputs(self, obj_idx: int, frame_idx: int, inputs: torch.Tensor):
        self.mask_inputs_per_obj[obj_idx][frame_idx] = inputs.to(
            self.inference_device, dtype=self.dtype, non_blocking=True
        )

    def remove_mask_inputs(self, obj_idx: int, frame_idx: int):
        self.mask_inputs_per_obj[obj_idx].pop(frame_idx, None)
