"""Generate a training-style Python file of about N lines, to measure how lint cost grows
with file size.

The file is what training code looks like to the linter: imports, a few ``nn.Module``
classes, and many small functions, each building a model, an optimizer and a loss, and
holding a loop with ``zero_grad``, ``backward`` and ``step``. Every tenth function leaves
something for the rules to find (a hardcoded ``.cuda()``, a loss kept with its graph), so
findings are reported and positions resolved too.

    python bench/gen_training.py 10000 > /tmp/train_10k.py
"""

from __future__ import annotations

import sys

HEADER = '''"""Generated training-style code (bench/gen_training.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, width)
        self.fc2 = nn.Linear(width, 1)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def make_loader(n: int = 64) -> DataLoader:
    data = TensorDataset(torch.randn(n, 8), torch.randn(n, 1))
    return DataLoader(data, batch_size=16, shuffle=True)

'''

CLEAN = '''
def train_{i}(epochs: int = 2, lr: float = 0.01):
    model = Net({width})
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    criterion = nn.MSELoss()
    loader = make_loader()
    model.train()
    for epoch in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
    return model

'''

WITH_FINDINGS = '''
def train_{i}(epochs: int = 2, lr: float = 0.01):
    model = Net({width}).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.MSELoss()
    losses = []
    for epoch in range(epochs):
        for inputs, targets in make_loader():
            optimizer.zero_grad()
            loss = criterion(model(inputs.cuda()), targets.cuda())
            loss.backward()
            optimizer.step()
            losses.append(loss)
    return losses

'''


def generate(lines: int) -> str:
    parts = [HEADER]
    count = HEADER.count("\n")
    i = 0
    while count < lines:
        template = WITH_FINDINGS if i % 10 == 9 else CLEAN
        part = template.format(i=i, width=16 + i % 7)
        parts.append(part)
        count += part.count("\n")
        i += 1
    return "".join(parts)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: gen_training.py LINES", file=sys.stderr)
        return 2
    sys.stdout.write(generate(int(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
