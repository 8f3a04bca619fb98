# Source: https://github.com/oxwhirl/pymarl/pull/73 ("Fix memory leak"), files
#   src/utils/logging.py (Logger) and src/learners/q_learner.py (QLearner.train, excerpt: the
#   optimisation and logging part) before the change
# Reported: "In Logger, the stats should be cleared periodically to avoid accumulating
#   unnecessary logs in the memory." (with a run command that logs every step to show it)
# Pattern: Logger.log_stat appends (t, value) to self.stats[key], a defaultdict of lists owned by
#   the one Logger of the run, and nothing ever removes entries (print_recent_stats only reads
#   the last 5). QLearner.train passes `grad_norm`, the value clip_grad_norm_ returns (a tensor on
#   the parameters' device), so one device tensor per logged step is kept for the whole run,
#   beside the floats of the other stats.
# Label: lines marked `# leak` keep the memory
from collections import defaultdict

import numpy as np
import torch as th


class Logger:
    def __init__(self, console_logger):
        self.console_logger = console_logger
        self.use_tb = False
        self.stats = defaultdict(lambda: [])

    def log_stat(self, key, value, t, to_sacred=True):
        self.stats[key].append((t, value))  # leak

        if self.use_tb:
            self.tb_logger(key, value, t)

    def print_recent_stats(self):
        log_str = "Recent Stats | t_env: {:>10} | Episode: {:>8}\n".format(*self.stats["episode"][-1])
        i = 0
        for (k, v) in sorted(self.stats.items()):
            if k == "episode":
                continue
            i += 1
            window = 5 if k != "epsilon" else 1
            item = "{:.4f}".format(np.mean([x[1] for x in self.stats[k][-window:]]))
            log_str += "{:<25}{:>8}".format(k + ":", item)
            log_str += "\n" if i % 4 == 0 else "\t"
        self.console_logger.info(log_str)


class QLearner:
    def __init__(self, mac, scheme, logger, args):
        self.args = args
        self.mac = mac
        self.logger = logger
        self.params = list(mac.parameters())
        self.optimiser = th.optim.RMSprop(params=self.params, lr=args.lr, alpha=args.optim_alpha, eps=args.optim_eps)
        self.log_stats_t = -self.args.learner_log_interval - 1

    def train(self, batch, t_env: int, episode_num: int):
        rewards = batch["reward"][:, :-1]
        actions = batch["actions"][:, :-1]
        terminated = batch["terminated"][:, :-1].float()
        mask = batch["filled"][:, :-1].float()
        mask[:, 1:] = mask[:, 1:] * (1 - terminated[:, :-1])

        mac_out = []
        self.mac.init_hidden(batch.batch_size)
        for t in range(batch.max_seq_length):
            agent_outs = self.mac.forward(batch, t=t)
            mac_out.append(agent_outs)
        mac_out = th.stack(mac_out, dim=1)
        chosen_action_qvals = th.gather(mac_out[:, :-1], dim=3, index=actions).squeeze(3)
        targets = rewards + self.args.gamma * (1 - terminated) * self.target_max_qvals(batch)

        td_error = (chosen_action_qvals - targets.detach())
        mask = mask.expand_as(td_error)
        masked_td_error = td_error * mask
        loss = (masked_td_error ** 2).sum() / mask.sum()

        self.optimiser.zero_grad()
        loss.backward()
        grad_norm = th.nn.utils.clip_grad_norm_(self.params, self.args.grad_norm_clip)
        self.optimiser.step()

        if t_env - self.log_stats_t >= self.args.learner_log_interval:
            self.logger.log_stat("loss", loss.item(), t_env)
            self.logger.log_stat("grad_norm", grad_norm, t_env)
            mask_elems = mask.sum().item()
            self.logger.log_stat("td_error_abs", (masked_td_error.abs().sum().item() / mask_elems), t_env)
            self.log_stats_t = t_env
