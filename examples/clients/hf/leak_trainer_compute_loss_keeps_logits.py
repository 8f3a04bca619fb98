"""Hugging Face Trainer: a compute_loss override keeps every step's logits.

Reported: https://github.com/huggingface/transformers/issues/36012 (users
override `compute_loss` to look at each forward pass's outputs because the
Trainer has no callback event after the forward pass); the Trainer's own
tr_loss leak of the same kind: https://github.com/huggingface/transformers/pull/6999

The subclass keeps `outputs.logits.detach()` of every training step in a list
"to inspect later": 8 x 64 x 512 float32 (1 MiB) per step on the GPU.

    python3 leak_trainer_compute_loss_keeps_logits.py --steps 200 [--device cuda|cpu]

A tiny GPT-2 built from its config (no download). Prints one
`CLIENT_STEP {"step", "loss", "step_ms"}` line per optimizer step.
"""
import argparse
import json
import tempfile
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


class TokenDataset(torch.utils.data.Dataset):
    def __init__(self, count, length, vocabulary):
        generator = torch.Generator().manual_seed(0)
        self.tokens = torch.randint(0, vocabulary, (count, length), generator=generator)

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, index):
        return {"input_ids": self.tokens[index], "labels": self.tokens[index]}


class InspectingTrainer(Trainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.inspected_logits = []

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        self.inspected_logits.append(outputs.logits.detach())  # LEAK: tensors-kept-alive
        loss = outputs.loss
        return (loss, outputs) if return_outputs else loss


class StepPrinter(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            record = {"step": state.global_step, "loss": float(logs["loss"]),
                      "step_ms": (time.perf_counter() - self.started) * 1e3}
            print("CLIENT_STEP " + json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=512, n_positions=64, n_embd=128, n_layer=2, n_head=4)
    model = GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as output_dir:
        training = TrainingArguments(output_dir=output_dir, max_steps=args.steps,
                                     per_device_train_batch_size=8, learning_rate=1e-3,
                                     logging_steps=1, save_strategy="no", report_to="none",
                                     disable_tqdm=True, seed=0, dataloader_num_workers=0,
                                     use_cpu=args.device == "cpu")
        trainer = InspectingTrainer(model=model, args=training,
                                    train_dataset=TokenDataset(8 * 50, 64, 512),
                                    callbacks=[StepPrinter()])
        trainer.train()


if __name__ == "__main__":
    main()
