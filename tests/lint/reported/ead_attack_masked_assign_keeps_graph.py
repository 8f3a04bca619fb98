# Source: https://github.com/BorealisAI/advertorch/pull/73 (advertorch/attacks/ead.py)
# Reported: "Fix increasing GPU memory in EAD attack ... Calling forward pass in the loop creates
#   the graph again and again. This becomes significant when we run EAD attack for (let's say 1000
#   iterations). It causes CUDA out of memory." The fix wraps the evaluation part of the loop in
#   torch.no_grad() (merged).
# Pattern: inside an optimisation loop, a distance computed from the (grad-requiring) iterate is
#   written with masked assignment into buffers that live for the whole attack; every write adds a
#   CopySlices node, so the buffers keep the graph of every iteration.
# Label: the lines marked `# leak` keep the memory (the masked writes and the call that feeds them).
import torch
import torch.nn as nn

DIST_UPPER = 1e10
INVALID_LABEL = -1
NUM_CHECKS = 10
ONE_MINUS_EPS = 0.999999
PREV_LOSS_INIT = 1e6


def calc_l2distsq(x, y):
    d = (x - y) ** 2
    return d.view(d.shape[0], -1).sum(dim=1)


def calc_l1dist(x, y):
    d = torch.abs(x - y)
    return d.view(d.shape[0], -1).sum(dim=1)


class ElasticNetL1Attack:
    def __init__(self, predict, num_classes, max_iterations=10000, binary_search_steps=9,
                 learning_rate=1e-2, beta=1e-2, clip_min=0., clip_max=1.,
                 abort_early=False):
        self.predict = predict
        self.num_classes = num_classes
        self.max_iterations = max_iterations
        self.binary_search_steps = binary_search_steps
        self.learning_rate = learning_rate
        self.beta = beta
        self.clip_min = clip_min
        self.clip_max = clip_max
        self.abort_early = abort_early
        self.global_step = 0

    def _fast_iterative_shrinkage_thresholding(self, x, yy_k, xx_k):
        zt = self.global_step / (self.global_step + 3)
        upper = torch.clamp(yy_k - self.beta, max=self.clip_max)
        lower = torch.clamp(yy_k + self.beta, min=self.clip_min)
        diff = yy_k - x
        cond1 = (diff > self.beta).float()
        cond2 = (torch.abs(diff) <= self.beta).float()
        cond3 = (diff < -self.beta).float()
        xx_k_p_1 = (cond1 * upper) + (cond2 * x) + (cond3 * lower)
        yy_k.data = xx_k_p_1 + (zt * (xx_k_p_1 - xx_k))
        return yy_k, xx_k_p_1

    def _update_if_smaller_dist_succeed(self, adv_img, labs, output, dist, batch_size,
                                        cur_dist, cur_labels, final_dist, final_labels,
                                        final_advs):
        _, output_label = torch.max(output, 1)
        success = output_label != labs
        mask = (dist < cur_dist) & success
        cur_dist[mask] = dist[mask]  # leak
        cur_labels[mask] = output_label[mask]
        mask = (dist < final_dist) & success
        final_dist[mask] = dist[mask]  # leak
        final_labels[mask] = output_label[mask]
        final_advs[mask] = adv_img[mask]

    def _loss_fn(self, output, y_onehot, l1dist, l2distsq):
        real = (y_onehot * output).sum(dim=1)
        other = ((1.0 - y_onehot) * output).max(1)[0]
        return torch.clamp(real - other, min=0.).sum() + l2distsq.sum()

    def perturb(self, x, y):
        batch_size = len(x)
        final_dist = torch.full((batch_size,), DIST_UPPER, device=x.device)
        final_labels = torch.full((batch_size,), INVALID_LABEL, dtype=torch.long, device=x.device)
        final_advs = x.clone()
        y_onehot = nn.functional.one_hot(y, self.num_classes).float()

        for outer_step in range(self.binary_search_steps):
            self.global_step = 0
            yy_k = nn.Parameter(x.clone())
            xx_k = x.clone()
            cur_dist = torch.full((batch_size,), DIST_UPPER, device=x.device)
            cur_labels = torch.full((batch_size,), INVALID_LABEL, dtype=torch.long,
                                    device=x.device)
            prevloss = PREV_LOSS_INIT
            lr = self.learning_rate

            for ii in range(self.max_iterations):
                if yy_k.grad is not None:
                    yy_k.grad.detach_()
                    yy_k.grad.zero_()
                output = self.predict(yy_k)
                loss_opt = self._loss_fn(output, y_onehot, None, calc_l2distsq(yy_k, x))
                loss_opt.backward()
                yy_k.data.add_(-lr, yy_k.grad.data)
                self.global_step += 1

                yy_k, xx_k = self._fast_iterative_shrinkage_thresholding(x, yy_k, xx_k)

                # loss ElasticNet or L1 over xx_k
                output = self.predict(xx_k)
                l2distsq = calc_l2distsq(xx_k, x)
                l1dist = calc_l1dist(xx_k, x)
                dist = l2distsq + (l1dist * self.beta)
                loss = self._loss_fn(output, y_onehot, l1dist, l2distsq)

                if self.abort_early:
                    if ii % (self.max_iterations // NUM_CHECKS or 1) == 0:
                        if loss > prevloss * ONE_MINUS_EPS:
                            break
                        prevloss = loss

                self._update_if_smaller_dist_succeed(  # leak
                    xx_k.data, y, output, dist, batch_size,
                    cur_dist, cur_labels,
                    final_dist, final_labels, final_advs)

        return final_advs
