# Source: https://github.com/muellerzr/fastinference/issues/7 ("CUDA Out of Memory When Running
#   Inference on a Large Test Set (And Proposed Fixes)"), fixed by commit
#   b9380b7d79287c39df08ee685c15956a95341267 ("make get_preds compatible for arbitrarily long test
#   sets"); file fastinference/inference/inference.py before the fix (excerpt: get_preds)
# Reported: "the inputs are being stored regardless of whether fully_decoded is True or False.
#   These inputs are being stored on the GPU, and are only released from memory after the
#   inference loop is finished. As the size of the test set increases, the GPU will at some
#   point run out of memory ... (I ran out of memory with <50,000 items ...)"
# Pattern: inside `with torch.no_grad()` (no graph), every batch's input images are appended, as
#   the GPU tensors the DataLoader produced, to inps (or to inps[i] for each input of a
#   multi-input model); the lists live for the whole pass over the test set. The fix stores
#   `.cpu()` copies, and only when fully_decoded asks for the inputs. (The model outputs kept in
#   raw and dec_out until the final concatenation were not part of the report.)
# Label: lines marked `# leak` keep the memory
import torch
from fastai2.vision.all import Learner, patch, tensor


@patch
def get_preds(x: Learner, ds_idx=1, dl=None, raw_outs=False, decoded_loss=True, fully_decoded=False,
              **kwargs):
    "Get predictions with possible decoding"
    inps, outs, dec_out, raw = [], [], [], []
    if dl is None:
        dl = x.dls[ds_idx].new(shuffle=False, drop_last=False)
    is_multi = False
    if x.dls.n_inp > 1:
        is_multi = True
        [inps.append([]) for _ in range(x.dls.n_inp)]
    x.model.eval()
    for batch in dl:
        with torch.no_grad():
            if is_multi:
                for i in range(x.dls.n_inp):
                    inps[i].append(batch[i])  # leak
            else:
                inps.append(batch[:x.dls.n_inp])  # leak
            if decoded_loss or fully_decoded:
                out = x.model(*batch[:x.dls.n_inp])
                raw.append(out)
                dec_out.append(x.loss_func.decodes(out))
            else:
                raw.append(x.model(*batch[:x.dls.n_inp]))
    raw = torch.cat(raw, dim=0).cpu().numpy()
    if fully_decoded or decoded_loss:
        dec_out = torch.cat(dec_out, dim=0)
    if not raw_outs:
        try:
            outs.insert(0, x.loss_func.activation(tensor(raw)).numpy())
        except Exception:
            outs.insert(0, dec_out)
    else:
        outs.insert(0, raw)
    if fully_decoded:
        outs = _fully_decode(x.dls, inps, outs, dec_out, is_multi)
    if decoded_loss:
        outs = _decode_loss(x.dls.vocab, dec_out, outs)
    return outs

