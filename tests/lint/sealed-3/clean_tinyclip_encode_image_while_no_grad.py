# Source: https://github.com/wkcn/TinyCLIP/issues/7 ("推理时显存泄漏的问题", GPU memory leak during
#   inference), the test script of the maintainer's answer
# Reported: "每推理一次，显存就会增加一些，并不会随着推理的结束而完全释放" (every inference adds some GPU
#   memory that is not released). Answer: "我用pytorch 2.3.1没有复现出内存泄漏 ... 跑了10000次迭代，显存没有
#   增长" (not reproduced with PyTorch 2.3.1; 10000 iterations, GPU memory did not grow), with the
#   printed memory_allocated constant at 674021376 bytes.
# Pattern: look-alike, no leak: a `while 1:` loop encodes a batch of images on the GPU every
#   iteration, under torch.no_grad() and autocast; the features are copied to numpy and dropped,
#   and image_features / im are rebound on the next iteration, so nothing outlives it.
# Label: control: nothing here keeps GPU memory across iterations
import open_clip
import torch
from PIL import Image

arch = 'TinyCLIP-auto-ViT-63M-32-Text-31M'
model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained='LAION400M')
model.eval()

tokenizer = open_clip.get_tokenizer(arch)

image_fname = './figure/TinyCLIP.jpg'
image = preprocess(Image.open(image_fname)).unsqueeze(0)
text = tokenizer(["a diagram", "a dog", "a cat"])
image = image.tile(128, 1, 1, 1).cuda()
model.cuda()


cnt = 0
while 1:
    with torch.no_grad(), torch.cuda.amp.autocast():
        im = image.clone()
        image_features = model.encode_image(im)
        image_features.cpu().numpy()
        torch.cuda.synchronize()
    cnt += 1
    print(cnt, image_features.shape, torch.cuda.memory_allocated())
