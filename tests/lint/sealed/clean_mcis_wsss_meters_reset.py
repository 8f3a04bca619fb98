# Source: https://github.com/GuoleiSun/MCIS_wsss/issues/11, files Classifier/utils/avgMeter.py and
#   Classifier/scripts/train.py, train() (at 1fc8f75)
# Reported: "why do we need loss.reset() in your train.py at every 1000 iteration? is that because
#   of trying to solve CUDA out of memory issue?" - answer: the meter is only a statistic of the
#   loss.
# Pattern: every meter is fed loss_val.data.item() (a Python float), so the meters hold no tensors
#   whether or not they are reset.
# Label: control: nothing here keeps GPU memory across steps
# ---- Classifier/utils/avgMeter.py ----
class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


# ---- Classifier/scripts/train.py ----
import torch

import time

from torch.utils.data import DataLoader
import torch.nn.functional as F

from utils import AverageMeter

import random

def train(args):
    batch_time = AverageMeter()
    losses = AverageMeter()
    losses1 = AverageMeter()
    losses2 = AverageMeter()
    losses2_1=AverageMeter()
    losses2_2=AverageMeter()
    losses3_1=AverageMeter()
    losses3_2=AverageMeter()
    losses4_1=AverageMeter()
    losses4_2=AverageMeter()
    losses1_comple=AverageMeter()
    losses2_comple=AverageMeter()

    total_epoch = args.epoch

    train_loader, val_loader = train_data_loader_siamese_more_augumentation(args)
    # train_loader, val_loader = train_data_loader_normal_resize(args)
    max_step = total_epoch*len(train_loader)
    args.max_step = max_step
    print('Max step:', max_step)

    model, optimizer = get_model(args)
    print(model)

    global_counter = args.global_counter
    print("here: ",global_counter)
    current_epoch = args.current_epoch

    model.train()
    end = time.time()

    while current_epoch < total_epoch:

        losses.reset()
        losses1.reset()
        losses2.reset()
        losses2_1.reset()
        losses2_2.reset()
        losses3_1.reset()
        losses3_2.reset()
        losses4_1.reset()
        losses4_2.reset()

        losses1_comple.reset()
        losses2_comple.reset()

        batch_time.reset()
        res = my_optim.reduce_lr(args, optimizer, current_epoch)
        steps_per_epoch = len(train_loader)

        validate(model, val_loader)
        model.train()                ## prepare for training
        index = 0
        for idx, dat in enumerate(train_loader):
            _, _, input1, input2, input1_transforms, label1, label2= dat

            # print(type(input1_transforms),len(input1_transforms),input1_transforms[0].size())
            if random.random()<0.0:
                # print(input1.size())
                input1=hide_patch(input1)
                input2=hide_patch(input2)
                input1_transforms=[hide_patch(i) for i in input1_transforms]

            img=[input1,input2]
            label=torch.cat([label1,label2])

            img2=[input1,input1_transforms[0]]
            img3=[input1,input1_transforms[1]]
            img4=[input1,input1_transforms[2]]

            # print(input1.size(),input2.size(),img.size())
            # print(torch.max(input1),torch.min(input1))

            # print(label.size(),img.size())

            # label = label.cuda(non_blocking=True)
            # label1 = label1.cuda(non_blocking=True)
            # label2 = label2.cuda(non_blocking=True)
            label = label.cuda()
            label1 = label1.cuda()
            label2 = label2.cuda()

            label_new=label1+label2
            label_new[label_new!=2]=0
            label_new[label_new==2]=1

            label1_comple=label1-label_new
            label2_comple=label2-label_new

            assert (label1_comple>=0).all() and (label2_comple>=0).all()

            label_new=torch.cat([label_new,label_new])

            # print(label1[0],label2[0],label_new[0])

            logits,co_logits = model(img, current_epoch, label, None)
            logits2,co_logits2 = model(img2, current_epoch, label, None)
            logits3,co_logits3 = model(img3, current_epoch, label, None)
            logits4,co_logits4 = model(img4, current_epoch, label, None)

            index += args.batch_size

            if logits is None:
                print("here")
                continue

            if len(logits.shape) == 1:
                logits = logits.reshape(label.shape)

            # print(logits.size(),label.size(),img.size())
            # loss_val1 = F.multilabel_soft_margin_loss(logits[:input1.size(0)], label[:input1.size(0)])
            loss_val1 = F.multilabel_soft_margin_loss(logits, label)
            loss_val2 = F.multilabel_soft_margin_loss(co_logits[:2*input1.size(0)], label_new)

            loss_val1_comple=F.multilabel_soft_margin_loss(co_logits[2*input1.size(0):3*input1.size(0)], label1_comple)
            loss_val2_comple=F.multilabel_soft_margin_loss(co_logits[3*input1.size(0):], label2_comple)

            loss_val2_1=F.multilabel_soft_margin_loss(logits2,torch.cat([label1,label1]))
            loss_val2_2=F.multilabel_soft_margin_loss(co_logits2[:2*input1.size(0)],torch.cat([label1,label1]))
            loss_val3_1=F.multilabel_soft_margin_loss(logits3,torch.cat([label1,label1]))
            loss_val3_2=F.multilabel_soft_margin_loss(co_logits3[:2*input1.size(0)],torch.cat([label1,label1]))
            loss_val4_1=F.multilabel_soft_margin_loss(logits4,torch.cat([label1,label1]))
            loss_val4_2=F.multilabel_soft_margin_loss(co_logits4[:2*input1.size(0)],torch.cat([label1,label1]))
            # print(loss_val,loss_val2)

            ## use co-attention
            loss_val=loss_val1+loss_val2+loss_val2_1+loss_val2_2+loss_val3_1+loss_val3_2+loss_val4_1+loss_val4_2
            ## don't use co-attention
            # loss_val=loss_val1+loss_val2_1+loss_val3_1+loss_val4_1
            # loss_val=loss_val4_1+loss_val4_2
            # print(loss_val)
            # print(logits.size())
            # print(logits[0])
            # print(label[0])

            if current_epoch>=2:
                if (label1_comple>0).any():
                    loss_val=loss_val+loss_val1_comple
                if (label2_comple>0).any():
                    loss_val=loss_val+loss_val2_comple

            optimizer.zero_grad()
            loss_val.backward()
            optimizer.step()

            # print(loss_val.data.item())
            losses.update(loss_val.data.item(), input1.size()[0]+input2.size()[0])
            losses1.update(loss_val1.data.item(), input1.size()[0]+input2.size()[0])
            losses2.update(loss_val2.data.item(), input1.size()[0]+input2.size()[0])
            losses2_1.update(loss_val2_1.data.item(), input1.size()[0]+input2.size()[0])
            losses2_2.update(loss_val2_2.data.item(), input1.size()[0]+input2.size()[0])
            losses3_1.update(loss_val3_1.data.item(), input1.size()[0]+input2.size()[0])
            losses3_2.update(loss_val3_2.data.item(), input1.size()[0]+input2.size()[0])
            losses4_1.update(loss_val4_1.data.item(), input1.size()[0]+input2.size()[0])
            losses4_2.update(loss_val4_2.data.item(), input1.size()[0]+input2.size()[0])

            if (label1_comple>0).any():
                losses1_comple.update(loss_val1_comple.data.item(), input1.size()[0]+input2.size()[0])
            if (label2_comple>0).any():
                losses2_comple.update(loss_val2_comple.data.item(), input1.size()[0]+input2.size()[0])

            batch_time.update(time.time() - end)
            end = time.time()

            global_counter += 1
            if global_counter % 1000 == 0:
                    losses.reset()
                    losses1.reset()
                    losses2.reset()
                    losses2_1.reset()
                    losses2_2.reset()
                    losses3_1.reset()
                    losses3_2.reset()
                    losses4_1.reset()
                    losses4_2.reset()

                    losses1_comple.reset()
                    losses2_comple.reset()

            if global_counter % args.disp_interval == 0:
                print('Epoch: [{}][{}/{}]\t'
                      'LR: {:.5f}\t'
                      'Loss {loss.val:.4f} ({loss.avg:.4f})\t'.format(
                        current_epoch, global_counter%len(train_loader), len(train_loader),
                        optimizer.param_groups[0]['lr'], loss=losses))
                print(losses.avg, losses1.avg, losses2.avg, losses2_1.avg, losses2_2.avg,losses3_1.avg, losses3_2.avg,losses4_1.avg, losses4_2.avg,losses1_comple.avg,losses2_comple.avg)

        # if current_epoch == args.epoch-1:
        save_checkpoint(args,
                        {
                            'epoch': current_epoch,
                            'global_counter': global_counter,
                            'state_dict':model.state_dict(),
                            'optimizer':optimizer.state_dict()
                        }, is_best=False,
                        filename='%s_epoch_%d.pth' %(args.dataset, current_epoch))
        current_epoch += 1
