# Source: https://github.com/JIA-Lab-research/DecoupleNet/issues/3 (train_phase1.py)
# Reported: "While you were recording the losses by using += symbols and without .item() ... you
#   were storing all states in whole epoch"; maintainer: "we actually have used .item() to take
#   the tensor value only ... before starting the next step, the memory will be freed
#   automatically"; reporter: "Fair, Thanks a lot".
# Label: clean. The *_value totals are reset to 0 at the top of every step, collect the
#   iter_size sub-steps of that step only, and are rebound to Python floats with .item() before
#   the next step starts, so no graph outlives its step.
import torch
import torch.distributed as dist


def train(args, model, model_D1, classifier, seg_loss, bce_loss, optimizer, optimizer_D1,
          scaler, trainloader_iter, source_label=0, target_label=1):
    for i_iter in range(args.num_steps):
        model.train()
        model_D1.train()

        loss_seg_value = 0
        loss_adv_src_value = 0
        loss_D1_value = 0

        optimizer.zero_grad()
        optimizer_D1.zero_grad()

        for sub_i in range(args.iter_size):
            for param in model_D1.parameters():
                param.requires_grad = False

            _, batch = trainloader_iter.__next__()
            images = batch['img'].cuda()
            labels = batch['label'].cuda()

            with torch.cuda.amp.autocast():
                feat_src = model(images)
                pred = classifier(feat_src)
                loss_seg = seg_loss(pred, labels)
                D_out = model_D1(feat_src)
                loss_adv_src = args.lambda_adv_src * bce_loss(
                    D_out, torch.FloatTensor(D_out.data.size()).fill_(target_label).cuda())
                loss = loss_seg + loss_adv_src

                # proper normalization
                loss = loss / args.iter_size
                loss_seg_value += loss_seg / args.iter_size
                loss_adv_src_value += loss_adv_src / args.iter_size

            scaler.scale(loss).backward()

            # train D
            for param in model_D1.parameters():
                param.requires_grad = True
            with torch.cuda.amp.autocast():
                src_D1_pred = model_D1(feat_src.detach())
                loss_D1_src = 0.5 * bce_loss(
                    src_D1_pred,
                    torch.FloatTensor(src_D1_pred.data.size()).fill_(source_label).cuda()
                ) / args.iter_size
                loss_D1_value += loss_D1_src
            scaler.scale(loss_D1_src).backward()

        n = torch.tensor(1.0).cuda()
        dist.all_reduce(n), dist.all_reduce(loss_seg_value), dist.all_reduce(loss_adv_src_value)
        dist.all_reduce(loss_D1_value)

        loss_seg_value = loss_seg_value.item() / n.item()
        loss_adv_src_value = loss_adv_src_value.item() / n.item()
        loss_D1_value = loss_D1_value.item() / n.item()

        scaler.step(optimizer)
        scaler.step(optimizer_D1)
        scaler.update()

        if i_iter % 10 == 0:
            print('iter = {0:8d}, loss_seg = {1:.3f}, loss_adv = {2:.3f}, loss_D1 = {3:.3f}'.format(
                i_iter, loss_seg_value, loss_adv_src_value, loss_D1_value))
