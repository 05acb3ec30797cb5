"""Tensors of 1 MiB or more that the caller ships reach the ranks through shared memory: exact
values for a whole tensor, a view at an offset, a transposed view and an int64 tensor; a rank's
writes stay its own; the caller's tensors keep their values (their storage moved in place); a
model's large parameter travels by value and trains. Prints one JSON line."""
import json

import torch

from nano_torch import nano


@nano(num_processes=2, auto_lr=False)
def check(model, optimizer, whole, tail, transposed, labels):
    same = {
        "whole": torch.equal(whole, torch.arange(1 << 20, dtype=torch.float32).reshape(1024, 1024)),
        "tail": torch.equal(tail, torch.arange(1 << 20, dtype=torch.float32)[100:]),
        "transposed": torch.equal(transposed, torch.arange(1 << 20, dtype=torch.float32).reshape(1024, 1024).t()),
        "labels": torch.equal(labels, torch.arange(1 << 18, dtype=torch.int64) % 7),
    }
    whole.add_(1)  # private to this rank
    optimizer.zero_grad()
    model(torch.ones(1, 1024)).sum().backward()
    optimizer.step()
    return same


base = torch.arange(1 << 20, dtype=torch.float32)
whole = base.clone().reshape(1024, 1024)
tail = base.clone()[100:]
transposed = base.clone().reshape(1024, 1024).t()
labels = torch.arange(1 << 18, dtype=torch.int64) % 7
model = torch.nn.Linear(1024, 1024)  # a 4 MiB weight: a parameter, sent by value
before = model.weight.detach().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
got = check(model, optimizer, whole, tail, transposed, labels)
got["caller_kept_values"] = (torch.equal(whole, base.reshape(1024, 1024)) and torch.equal(tail, base[100:])
                             and torch.equal(transposed, base.reshape(1024, 1024).t()))
got["model_trained"] = not torch.equal(model.weight, before)
got["moved_to_shared_memory"] = whole.is_shared() and labels.is_shared() and not model.weight.is_shared()
print(json.dumps(got))
