"""Hugging Face Trainer control: evaluation every 25 steps gathers all logits, then frees them.

Reported: https://github.com/huggingface/transformers/issues/7232 and the
`eval_accumulation_steps` fix, https://github.com/huggingface/transformers/pull/7767
("the Trainer accumulates all predictions on the host (GPU) before gathering"),
and https://github.com/huggingface/transformers/issues/30943 (memory climbing
across evaluations with compute_metrics).

During each evaluation the Trainer concatenates every batch's logits on the
GPU (here 10 batches, about 10 MiB) and drops them when the evaluation ends:
memory steps up and back down every 25 steps. Not a leak.

    python3 control_trainer_periodic_evaluation.py --steps 200 [--device cuda|cpu]

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
    def __init__(self, count, length, vocabulary, seed):
        generator = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, vocabulary, (count, length), generator=generator)

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, index):
        return {"input_ids": self.tokens[index], "labels": self.tokens[index]}


def token_accuracy(prediction):
    logits, labels = prediction.predictions, prediction.label_ids
    if isinstance(logits, tuple):
        logits = logits[0]
    return {"accuracy": float((logits.argmax(-1)[:, :-1] == labels[:, 1:]).mean())}


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
                                     per_device_train_batch_size=8, per_device_eval_batch_size=8,
                                     learning_rate=1e-3, logging_steps=1, eval_strategy="steps",
                                     eval_steps=25, save_strategy="no", report_to="none",
                                     disable_tqdm=True, seed=0, dataloader_num_workers=0,
                                     use_cpu=args.device == "cpu")
        trainer = Trainer(model=model, args=training,
                          train_dataset=TokenDataset(8 * 50, 64, 512, seed=0),
                          eval_dataset=TokenDataset(8 * 10, 64, 512, seed=1),
                          compute_metrics=token_accuracy, callbacks=[StepPrinter()])
        trainer.train()


if __name__ == "__main__":
    main()
