# Source: https://github.com/huggingface/transformers/issues/26588
# Reported: "RWKV's 'RNN mode' results in unchecked memory growth, causing OOM ... Run this code,
#   and your GPU will go OOM very quickly".
# Pattern: the model's recurrent state is fed back every iteration outside no_grad, so each state
#   carries the graph of every previous call.
# Label: the line marked `# leak` keeps the memory.
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

model_name = "RWKV/rwkv-4-430m-pile"
string = "Lorem ipsum dolor sit amet, consectetur adipiscing elit."

tokenizer = AutoTokenizer.from_pretrained(model_name)
model = AutoModelForCausalLM.from_pretrained(model_name, output_hidden_states=True, device_map="auto")

state = None
while True:
    inputs = tokenizer(string, return_tensors="pt").to(model.device)
    outputs = model(**inputs, state=state, use_cache=True)
    state = outputs.state  # leak
    print(torch.cuda.memory_allocated())
    time.sleep(1)
