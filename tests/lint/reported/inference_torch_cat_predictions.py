# Source: https://github.com/pytorch/pytorch/issues/13613
# Reported: "if I do a lot of inference on the GPU and I accumulate the result with torch.cat on the
#   CPU like that: y_predlabel = torch.cat((y_predlabel, batch_y_predlabel.cpu())) the GPU memory
#   increase over time and until I have a Runtime Error: cuda out of memory ... The tensors on the
#   GPU looks to never be free but I do batch_y_predlabel.cpu()". The reporter's fix changed
#   batch_y_predlabel itself, so it carried the model's graph. (The torch.cat line is as reported;
#   the loop around it is reconstructed.)
# Pattern: predictions concatenated across an inference loop without no_grad; .cpu() keeps the
#   autograd graph, whose saved activations live on the GPU.
# Label: the line marked `# leak` keeps the memory.
import torch

model = torch.load("model.pt").cuda()
model.eval()

y_predlabel = torch.FloatTensor()
for batch_x in test_loader:
    batch_x = batch_x.cuda()
    batch_y_predlabel = model(batch_x)
    y_predlabel = torch.cat((y_predlabel, batch_y_predlabel.cpu()))  # leak
print(y_predlabel.shape)
