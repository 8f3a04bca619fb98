# Source: https://github.com/meta-pytorch/botorch/issues/2526 (fixed by
#   https://github.com/pytorch/botorch/pull/2529, botorch/optim/core.py)
# Reported: "When training the SingleTaskVariationalGP using a DataLoader, there is memory leak
#   that causes the device to run out of memory as training progresses ... I believe this is
#   because fval in torch_minimize is not detached before passing it to stopping_criterion";
#   maintainers merged the fix `fval = closure()[0].detach()`.
# Pattern: the loss of each step is handed, graph and all, to a stateful stopping criterion that
#   keeps a moving window of past values with torch.cat([window[-n:], new]); the window has a
#   fixed size but each cat extends the graph of the previous one, so every step's graph is kept.
# Label: the lines marked `# leak` keep the memory (the window update and the call that feeds it).
from time import monotonic

import torch
from torch import Tensor
from torch.optim import Adam


class ExpMAStoppingCriterion:
    def __init__(self, maxiter=10000, minimize=True, n_window=10, eta=1.0, rel_tol=1e-5):
        self.maxiter = maxiter
        self.minimize = minimize
        self.n_window = n_window
        self.rel_tol = rel_tol
        self.iter = 0
        weights = torch.exp(torch.linspace(-eta, 0, self.n_window))
        self.weights = weights / weights.sum()
        self._prev_fvals = None

    def __call__(self, fvals: Tensor) -> bool:
        return self.evaluate(fvals)

    def evaluate(self, fvals: Tensor) -> bool:
        self.iter += 1
        if self.iter == self.maxiter:
            return True
        if self._prev_fvals is None:
            self._prev_fvals = fvals.unsqueeze(0)
        else:
            self._prev_fvals = torch.cat(  # leak
                [self._prev_fvals[-self.n_window :], fvals.unsqueeze(0)]
            )
        if self._prev_fvals.size(0) < self.n_window + 1:
            return False
        weights = self.weights.to(fvals)
        prev_ma = (self._prev_fvals[:-1] * weights).sum(dim=0)
        ma = (self._prev_fvals[1:] * weights).sum(dim=0)
        rel_delta = (prev_ma - ma) / prev_ma.abs()
        if not self.minimize:
            rel_delta = -rel_delta
        return bool(torch.max(rel_delta) < self.rel_tol)


def torch_minimize(closure, parameters, optimizer=Adam, step_limit=None,
                   stopping_criterion=None):
    start_time = monotonic()
    optimizer = optimizer(list(parameters.values()))
    for step in range(1, step_limit + 1):
        fval, _ = closure()
        result = {"step": step, "fval": fval.detach().cpu().item(),
                  "runtime": monotonic() - start_time}
        if stopping_criterion and stopping_criterion(fval):  # leak
            break
        optimizer.step()
    return result


def fit_with_data_loader(mll, train_loader, step_limit=2000):
    parameters = {n: p for n, p in mll.named_parameters() if p.requires_grad}

    def closure():
        # one mini-batch per call; sets .grad on the parameters
        train_x, train_y = next(iter(train_loader))
        for p in parameters.values():
            p.grad = None
        loss = -mll(mll.model(train_x), train_y).sum()
        loss.backward()
        return loss, [p.grad for p in parameters.values()]

    return torch_minimize(closure, parameters, step_limit=step_limit,
                          stopping_criterion=ExpMAStoppingCriterion())
