# Source: https://github.com/ray-project/ray/pull/40940 (finetune_hf_llm.py)
# Reported: "Make sure that loss can be freed after every iteration ... the memory leak in our core
#   training loop" (review thread on `loss_sum += loss`).
# Pattern: the Hugging Face model's loss summed across the epoch for the log line.
# Label: the line marked `# leak` keeps the memory.
import time

import torch


def training_function(kwargs: dict):
    accelerator = kwargs["accelerator"]
    model, optimizer, train_dataloader, lr_scheduler = kwargs["prepared"]
    num_epochs = kwargs["num_epochs"]
    for epoch in range(num_epochs):
        model.train()
        loss_sum = torch.tensor(0.0).to(accelerator.device)
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                s_fwd = time.time()
                outputs = model(**batch)
                loss = outputs.loss
                loss_sum += loss  # leak
                e_fwd = time.time()
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if step % 10 == 0:
                print(f"[epoch {epoch} step {step}] loss: {loss.item()} fwd {e_fwd - s_fwd:.2f}s")
        aggregated_loss = torch.mean(accelerator.gather(loss_sum[None])).item()
        print(f"epoch {epoch} mean loss {aggregated_loss / (step + 1)}")
