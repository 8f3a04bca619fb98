# Source: https://pytorch.org/docs/stable/notes/faq.html ("My model reports cuda runtime error(2):
#   out of memory"), example added in https://github.com/pytorch/pytorch/pull/5251
# Reported: "Here, total_loss is accumulating history across your training loop, since loss is a
#   differentiable variable with autograd history."
# Pattern: the running total of the loss tensor itself.
# Label: the line marked `# leak` keeps the memory.
import torch

total_loss = 0
for i in range(10000):
    optimizer.zero_grad()
    output = model(input)
    loss = criterion(output)
    loss.backward()
    optimizer.step()
    total_loss += loss  # leak
