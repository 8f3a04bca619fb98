# Shape of ultralytics/yolov5@5081342f04fb287fc2e5f2b5a4e06752b7937b1c:detect.py (run), shortened.
# Clean: the whole function runs under the project's own `@smart_inference_mode()`
# (torch.inference_mode or no_grad, from utils/torch_utils.py), so no output carries a
# graph; and `pred` starts again from None for every batch: the inner loop joins the
# outputs of one batch's chunks, the result the batch is for.
import torch

from models.common import DetectMultiBackend
from utils.general import non_max_suppression
from utils.torch_utils import select_device, smart_inference_mode


@smart_inference_mode()
def run(weights, dataset, augment=False, conf_thres=0.25, iou_thres=0.45):
    device = select_device("")
    model = DetectMultiBackend(weights, device=device)
    for path, im, im0s, vid_cap, s in dataset:
        im = torch.from_numpy(im).to(model.device)
        im = im.half() if model.fp16 else im.float()
        im /= 255
        if len(im.shape) == 3:
            im = im[None]
        if model.xml and im.shape[0] > 1:
            ims = torch.chunk(im, im.shape[0], 0)
        if model.xml and im.shape[0] > 1:
            pred = None
            for image in ims:
                if pred is None:
                    pred = model(image, augment=augment).unsqueeze(0)
                else:
                    pred = torch.cat((pred, model(image, augment=augment).unsqueeze(0)), dim=0)
            pred = [pred, None]
        else:
            pred = model(im, augment=augment)
        pred = non_max_suppression(pred, conf_thres, iou_thres)
        for i, det in enumerate(pred):
            print(path, len(det))
