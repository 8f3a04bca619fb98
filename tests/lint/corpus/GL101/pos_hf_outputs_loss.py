import torch
from transformers import AutoModelForSequenceClassification

model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased").cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)

tr_loss = 0
for batch in train_dataloader:
    batch = {k: v.cuda() for k, v in batch.items()}
    outputs = model(**batch)
    loss = outputs.loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    tr_loss += loss  # expect: GL101
