# Source: https://github.com/pytorch/pytorch/issues/144181
# Reported: "Using epoch_disc_sum += loss_disc and epoch_gen_sum += loss_gen_all in the code below
#   eats ~3MB/step RAM, so with a train 3500 steps long it consumes ~10GB by the end of the epoch".
# Pattern: summing GAN losses across an epoch without .item().
# Label: the lines marked `# leak` keep the memory.
import torch
from torch.cuda.amp import autocast


def train_and_evaluate(epoch, net_g, net_d, optim_g, optim_d, scaler, train_loader, config, device):
    epoch_disc_sum = 0.0
    epoch_gen_sum = 0.0
    data_iterator = enumerate(train_loader)
    for batch_idx, info in data_iterator:
        phone, pitch, spec, wave = info
        use_amp = config.train.fp16_run and device.type == "cuda"
        with autocast(enabled=use_amp):
            model_output = net_g(phone, pitch, spec)
            y_hat, x_mask, z_mask = model_output
            y_d_hat_r, y_d_hat_g, _, _ = net_d(wave, y_hat.detach())
            loss_disc = discriminator_loss(y_d_hat_r, y_d_hat_g)
        epoch_disc_sum += loss_disc  # leak
        optim_d.zero_grad()
        scaler.scale(loss_disc).backward()
        scaler.unscale_(optim_d)
        torch.nn.utils.clip_grad_norm_(net_d.parameters(), max_norm=1000.0)
        scaler.step(optim_d)
        scaler.update()

        with autocast(enabled=use_amp):
            _, y_d_hat_g, fmap_r, fmap_g = net_d(wave, y_hat)
            loss_gen_all = generator_loss(y_d_hat_g) + feature_loss(fmap_r, fmap_g)
        epoch_gen_sum += loss_gen_all  # leak
        optim_g.zero_grad()
        scaler.scale(loss_gen_all).backward()
        scaler.step(optim_g)
        scaler.update()
    avg_losses = {"disc": epoch_disc_sum / len(train_loader), "gen": epoch_gen_sum / len(train_loader)}
    return avg_losses
