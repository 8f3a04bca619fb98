# Source: https://github.com/pai4451/ML2021/issues/2 ("HW7 Out of memory"), the HW7 (BERT
#   extractive question answering) sample code given to the ML2021 students ("the HW7 TA example
#   code"), as copied into public course repositories (excerpt: the training loop)
# Reported: "When i run the HW7 TA example code, my cpu ram keep increasing until out of my 64G
#   ram ... `train_loss += output.loss` # store the complete compution graph leading to out of
#   memory ... `train_loss += output.loss.detach() or .item()` if i modify original code to
#   this, problem solved." Answer: "Tensor.detach() detached tensor from the current graph. This
#   helps prevent memory leak."
# Pattern: train_loss is a running sum of the model's loss tensor, made across steps and kept
#   across them (it is only rebound to 0 when a log line is printed); each `+=` links the step's
#   whole BERT graph into it.
# Label: lines marked `# leak` keep the memory
import torch
from tqdm.auto import tqdm


def train(model, train_loader, optimizer, accelerator, device, num_epoch, logging_step, fp16_training):
    model.train()
    print("Start Training ...")
    for epoch in range(num_epoch):
        step = 1
        train_loss = train_acc = 0

        for data in tqdm(train_loader):
            # Load all data into GPU
            data = [i.to(device) for i in data]

            output = model(input_ids=data[0], token_type_ids=data[1], attention_mask=data[2],
                           start_positions=data[3], end_positions=data[4])

            # Choose the most probable start position / end position
            start_index = torch.argmax(output.start_logits, dim=1)
            end_index = torch.argmax(output.end_logits, dim=1)

            # Prediction is correct only if both start_index and end_index are correct
            train_acc += ((start_index == data[3]) & (end_index == data[4])).float().mean()
            train_loss += output.loss  # leak

            if fp16_training:
                accelerator.backward(output.loss)
            else:
                output.loss.backward()

            optimizer.step()
            optimizer.zero_grad()
            step += 1

            # Print training loss and accuracy over past logging step
            if step % logging_step == 0:
                print(f"Epoch {epoch + 1} | Step {step} | loss = {train_loss.item() / logging_step:.3f}, "
                      f"acc = {train_acc / logging_step:.3f}")
                train_loss = train_acc = 0
