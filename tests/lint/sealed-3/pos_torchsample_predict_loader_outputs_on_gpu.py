# Source: https://github.com/nitrain/nitrain/issues/27 ("GPU memory leak", filed when the project
#   was ncullen93/torchsample); file torchsample/modules/module_trainer.py at commit
#   00a41b05d43b2815d915c632c94471e208e90153 (2017-05-28, the day before the report; excerpt:
#   ModuleTrainer.predict_loader)
# Reported: "I was facing out of memory issues while training for long number of iterations or
#   epochs while training on GPUs." ... "I met similar problem while using predict_loader." ...
#   "I experienced the same issue when running predict() and predict_loader() methods on large
#   GPU datasets. A fix I found is to move all output predictions to cpu() before running
#   torch.cats()."
# Pattern: predict_loader runs the model on every batch moved to the GPU (plain Variables: the
#   graph is recorded, nothing is volatile or under no_grad) and appends each output to
#   prediction_list; all outputs, with their graphs, stay on the GPU until the torch.cat after
#   the last batch.
# Label: lines marked `# leak` keep the memory
import torch as th
from torch.autograd import Variable


class ModuleTrainer(object):
    def __init__(self, model):
        self.model = model

    def predict_loader(self,
                       loader,
                       cuda_device=-1,
                       verbose=1):
        prediction_list = []
        for batch_idx, batch_data in enumerate(loader):
            if not isinstance(batch_data, (tuple, list)):
                batch_data = [batch_data]
            input_batch = batch_data[0]
            if not isinstance(input_batch, (list, tuple)):
                input_batch = [input_batch]
            input_batch = [Variable(ins) for ins in input_batch]
            if cuda_device > -1:
                input_batch = [ins.cuda(cuda_device) for ins in input_batch]

            prediction_list.append(self.model(*input_batch))  # leak

        # concatenate all outputs of the same type together (when there are multiple outputs)
        if len(prediction_list) > 0 and isinstance(prediction_list[0], (tuple, list)):
            nb_out = len(prediction_list[0])
            out_list = []
            for out_i in range(nb_out):
                precdiction_out_i = [prediction[out_i] for prediction in prediction_list]
                out_list.append(th.cat(precdiction_out_i, 0))
            return out_list

        return th.cat(prediction_list, 0)
