# Source: https://github.com/huggingface/transformers/pull/6999 ("fixed trainer tr_loss memory
#   leak", fixes issue #6939), file src/transformers/trainer.py after the fix (excerpt: the
#   epoch/step loop of Trainer.train and Trainer.training_step, reduced; written from the pull
#   request and its review, not copied from the file)
# Reported: "The Trainer class contains the memory leak ... The model trains for around 20 000
#   steps ... before using up all 12GB of RAM." Review: "the problem is not that we don't call
#   .item() but that we don't call .detach(), which means some variables are kept forever for a
#   backward pass (that is never called)."
# Pattern: the same loop; training_step now returns `loss.detach()`, so tr_loss stays one
#   device scalar without a graph, and the per-step graphs are freed after backward.
# Label: control: nothing here keeps GPU memory across steps
import torch


class Trainer:
    def train(self, model_path=None):
        train_dataloader = self.get_train_dataloader()
        num_train_epochs = self.args.num_train_epochs
        model = self.model
        tr_loss = torch.tensor(0.0).to(self.args.device)
        logging_loss_scalar = 0.0
        model.zero_grad()
        for epoch in range(int(num_train_epochs)):
            epoch_iterator = train_dataloader
            for step, inputs in enumerate(epoch_iterator):
                tr_loss += self.training_step(model, inputs)
                if (step + 1) % self.args.gradient_accumulation_steps == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), self.args.max_grad_norm)
                    self.optimizer.step()
                    self.lr_scheduler.step()
                    model.zero_grad()
                    self.global_step += 1
                    if self.args.logging_steps > 0 and self.global_step % self.args.logging_steps == 0:
                        tr_loss_scalar = tr_loss.item()
                        logs = {"loss": (tr_loss_scalar - logging_loss_scalar) / self.args.logging_steps}
                        logging_loss_scalar = tr_loss_scalar
                        self.log(logs)
        return self.global_step, tr_loss.item() / self.global_step

    def training_step(self, model, inputs):
        model.train()
        inputs = self._prepare_inputs(inputs)
        outputs = model(**inputs)
        # Save past state if it exists
        if self.args.past_index >= 0:
            self._past = outputs[self.args.past_index]
        # We don't use .loss here since the model may return tuples instead of ModelOutput.
        loss = outputs[0]
        if self.args.n_gpu > 1:
            loss = loss.mean()  # mean() to average on multi-gpu parallel training
        if self.args.gradient_accumulation_steps > 1:
            loss = loss / self.args.gradient_accumulation_steps
        loss.backward()
        return loss.detach()
