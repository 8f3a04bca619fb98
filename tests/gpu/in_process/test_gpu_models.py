"""Tests for the pytest plugin on the GPU (tests/gpu/suites/in_process.sh): real CUDA
tensors through PyTorch's allocator hook. Which ones must fail is in the suite."""
import pytest
import torch

cache = []


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()


@pytest.mark.gpuleak_limit_leaks("1 MiB")
def test_leaks_outputs_into_a_global_list():
    net = model()
    for _ in range(4):
        cache.append(net(torch.randn(512, 256, device="cuda")))  # keeps graph and outputs


@pytest.mark.gpuleak_limit_leaks("1 MiB")
def test_clean_inference():
    net = model()
    with torch.no_grad():
        for _ in range(4):
            out = net(torch.randn(512, 256, device="cuda"))
    assert out.shape == (512, 10)


@pytest.mark.gpuleak_limit_leaks("1 MiB")
def test_clean_training_step():
    net = model()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(4):
        loss = net(torch.randn(512, 256, device="cuda")).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    del net, optimizer, loss


losses = []
net_for_repeat = None


@pytest.mark.gpuleak_repeat(12)
def test_loss_kept_every_repetition():
    global net_for_repeat
    if net_for_repeat is None:
        net_for_repeat = model()
    loss = net_for_repeat(torch.randn(512, 256, device="cuda")).square().mean()
    losses.append(loss)  # the graph of every repetition stays


@pytest.mark.gpuleak_repeat(12)
def test_loss_item_every_repetition():
    global net_for_repeat
    if net_for_repeat is None:
        net_for_repeat = model()
    loss = net_for_repeat(torch.randn(512, 256, device="cuda")).square().mean()
    losses.append(loss.item())


@pytest.mark.gpuleak_limit_memory("64 MiB")
def test_peaks_above_its_limit():
    big = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    del big
