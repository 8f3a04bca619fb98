# Source: https://github.com/udacity/deep-learning-v2-pytorch/pull/106 ("Update
#   dlnd_face_generation.ipynb"), commit
#   https://github.com/udacity/deep-learning-v2-pytorch/commit/1ad9802e79181afb8f6eee4822291900a9fd27f3;
#   notebook project-face-generation/dlnd_face_generation.ipynb before that commit: its code
#   cells for imports, the GPU check and the train function, in order (the other cells and the
#   template's blank lines for the student's code cut)
# Reported: "I've experienced CUDA memory leakage during training, the CUDA memory was increasing at
#   the end of each epoch. This change has solved the issue for me."
# Pattern: after every epoch the train function samples the generator on a fixed CUDA noise batch
#   with autograd on (`G.eval()` does not turn it off) and appends the output to `samples`, a
#   list kept for the whole run (pickled at the end). Each entry is a CUDA tensor that carries
#   its forward graph through G, so one batch of images and one graph per epoch stay in GPU
#   memory. The losses are recorded as `.item()` floats.
# Label: lines marked `# leak` keep the memory
data_dir = 'processed_celeba_small/'

"""
DON'T MODIFY ANYTHING IN THIS CELL
"""
import pickle as pkl
import matplotlib.pyplot as plt
import numpy as np
import problem_unittests as tests
#import helper

# (... cut: %matplotlib inline)


# necessary imports
import torch
from torchvision import datasets
from torchvision import transforms


# (... cut: the data loader, the Discriminator and Generator templates and their tests)


"""
DON'T MODIFY ANYTHING IN THIS CELL
"""
import torch

# Check for a GPU
train_on_gpu = torch.cuda.is_available()
if not train_on_gpu:
    print('No GPU found. Please use a GPU to train your neural network.')
else:
    print('Training on GPU!')


# (... cut: the loss functions and the optimizers, left for the student to write)


def train(D, G, n_epochs, print_every=50):
    '''Trains adversarial networks for some number of epochs
       param, D: the discriminator network
       param, G: the generator network
       param, n_epochs: number of epochs to train for
       param, print_every: when to print and record the models' losses
       return: D and G losses'''
    
    # move models to GPU
    if train_on_gpu:
        D.cuda()
        G.cuda()

    # keep track of loss and generated, "fake" samples
    samples = []
    losses = []

    # Get some fixed data for sampling. These are images that are held
    # constant throughout training, and allow us to inspect the model's performance
    sample_size=16
    fixed_z = np.random.uniform(-1, 1, size=(sample_size, z_size))
    fixed_z = torch.from_numpy(fixed_z).float()
    # move z to GPU if available
    if train_on_gpu:
        fixed_z = fixed_z.cuda()

    # epoch training loop
    for epoch in range(n_epochs):

        # batch training loop
        for batch_i, (real_images, _) in enumerate(celeba_train_loader):

            batch_size = real_images.size(0)
            real_images = scale(real_images)

            # (... cut: the template's blank `d_loss = ` / `g_loss = ` lines for the student's training code)

            # Print some loss stats
            if batch_i % print_every == 0:
                # append discriminator loss and generator loss
                losses.append((d_loss.item(), g_loss.item()))
                # print discriminator and generator loss
                print('Epoch [{:5d}/{:5d}] | d_loss: {:6.4f} | g_loss: {:6.4f}'.format(
                        epoch+1, n_epochs, d_loss.item(), g_loss.item()))


        ## AFTER EACH EPOCH##    
        # this code assumes your generator is named G, feel free to change the name
        # generate and save sample, fake images
        G.eval() # for generating samples
        samples_z = G(fixed_z)
        samples.append(samples_z)  # leak
        G.train() # back to training mode

    # Save training generator samples
    with open('train_samples.pkl', 'wb') as f:
        pkl.dump(samples, f)
    
    # finally return losses
    return losses
