import torch


def train_gan(netG, netD, loader, optD, optG, criterion, noise):
    for real, _ in loader:
        optD.zero_grad()
        optG.zero_grad()
        fake = netG(noise)
        d_loss = criterion(netD(real), 1) + criterion(netD(fake), 0)
        d_loss.backward(retain_graph=True)
        optD.step()
        g_loss = criterion(netD(fake), 1)
        g_loss.backward()
        optG.step()
