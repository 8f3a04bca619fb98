# Source: https://github.com/oppo-us-research/USST/issues/1, file src/runtime.py, train_epoch and
#   eval_epoch (at beebdb9; no fix was committed)
# Reported: "The cpu ram usage increases every epoch and every batch in one epoch ... If i use gpu
#   to train the model, the memory usage will increase every batch." The maintainer could not
#   reproduce it.
# Pattern: train_epoch adds losses['total_loss'], with its graph, to the running loss for the whole
#   epoch (the FAQ's total_loss += loss).
# Label: lines marked `# leak` keep the memory
from tqdm import tqdm
import numpy as np
from src.utils import random_ratios_batch, get_test_ratios, send_to_gpu
import src.utils as utils
import src.utils_h2o as utils_h2o



def train_epoch(cfg, model, traindata_loader, criterion, optimizer, writer, epoch):

    model.train()
    loss = 0
    pbar = tqdm(total=len(traindata_loader), ncols=0, desc='train epoch {}/{}'.format(epoch + 1, cfg.TRAIN.epoch))
    for batch_id, batch_data in enumerate(traindata_loader):

        filename, clip, odometry, nframes, traj_gt = batch_data
        # send data to device
        clip, traj_gt = send_to_gpu((clip, traj_gt), cfg.device, non_blocking=True)

        # generate a batch of random observation ratios
        ratios = random_ratios_batch(nframes, cfg.TRAIN)

        # run inference
        outputs = model(clip, nframes, ratios, traj=traj_gt)

        # compute losses
        losses = criterion(outputs, nframes, traj_gt)
        loss += losses['total_loss']  # leak

        # backward
        optimizer.zero_grad()
        losses['total_loss'].backward()
        optimizer.step()

        # write the lr and losses
        iter_cur = epoch * len(traindata_loader) + batch_id
        writer.add_scalar('misc/lr', optimizer.state_dict()['param_groups'][0]['lr'], iter_cur)
        for k, v in losses.items():
            writer.add_scalars('train/{}'.format(k), {k: v}, iter_cur)  # draw loss curves in different figures

        pbar.set_postfix({"train loss": losses['total_loss'].item()})
        pbar.update()

    loss /= len(traindata_loader)
    pbar.close()

    return loss


def eval_epoch(cfg, model, valdata_loader, criterion, writer, epoch):

    model.eval()

    all_preds, all_gts = {}, {}
    pbar = tqdm(total=len(valdata_loader), ncols=0, desc='eval epoch {}'.format(epoch + 1))
    for batch_id, batch_data in enumerate(valdata_loader):

        _, clip, _, nframes, traj_gt = batch_data
        # send data to device
        clip, traj_gt = send_to_gpu((clip, traj_gt), cfg.device, non_blocking=True)

        # fixed set of observation ratios
        ratios = get_test_ratios(cfg.TEST.ratios, nframes)

        # run inference
        outputs = model(clip, nframes, ratios, traj=traj_gt)

        # compute losses
        losses = criterion(outputs, nframes, traj_gt)

        # write the lr and losses
        iter_cur = epoch * len(valdata_loader) + batch_id
        for k, v in losses.items():
            writer.add_scalars('test/{}'.format(k), {k: v}, iter_cur)

        # gather unobserved predictions and ground truths
        preds, gts = utils.gather_eval_results(outputs[0], nframes, traj_gt,
                                                ignore_depth=model.ignore_depth, centralize=model.centralize)
        if batch_id == 0:
            all_preds.update(preds)
            all_gts.update(gts)
        else:
            for r in list(preds.keys()):
                all_preds[r].extend(preds[r])
                all_gts[r].extend(gts[r])

        pbar.set_postfix({"val loss": losses['total_loss'].item()})
        pbar.update()

    for r in list(all_preds.keys()):
        all_preds[r] = np.vstack(all_preds[r])  # (N, 3)
        all_gts[r] = np.vstack(all_gts[r])  # (N, 3)

    pbar.close()

    return all_preds, all_gts
