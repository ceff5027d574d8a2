"""Property tests: the engine never crashes on valid Python, and fixing is idempotent."""

from __future__ import annotations

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source, parse

ALL_RULES = select_rules(["ALL"], [], [])
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@PROPERTY_SETTINGS
@given(hypothesmith.from_grammar())
def test_engine_never_crashes_on_generated_python(source):
    result = lint_module_source(source, ALL_RULES, FixMode.UNSAFE)
    assert all(f.start.row >= 1 and f.start.column >= 1 for f in result.findings)
    again = lint_module_source(result.fixed_source, ALL_RULES, FixMode.UNSAFE)
    assert again.fixed_source == result.fixed_source


@PROPERTY_SETTINGS
@given(hypothesmith.from_node())
def test_engine_never_crashes_on_generated_syntax_trees(source):
    lint_module_source(source, ALL_RULES, FixMode.UNSAFE)


# Training-shaped programs built from PyTorch fragments, so that rules and their fixes run.
IMPORTS = st.sampled_from(
    [
        "import torch\nimport torch.nn as nn\n",
        "import torch\nfrom torch import nn\n",
        "import torch as th\nimport torch.nn as nn\ntorch = th\n",
    ]
)
STATEMENTS = st.sampled_from(
    [
        "model = nn.Linear(4, 2)\n",
        "model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1), nn.Linear(4, 2))\n",
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "criterion = nn.CrossEntropyLoss()\n",
        "model = model.cuda()\n",
        "x = torch.randn(8, 4).to('cuda')\n",
        "torch.save(model, 'model.pt')\n",
        "torch.save(model.state_dict(), 'model.pt')  # noqa: TL501\n",
        "losses = []\n",
        "scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)\n",
        "for epoch in range(3):\n    for x, y in loader:\n        out = model(x)\n        loss = criterion(out, y)\n        loss.backward()\n        optimizer.step()\n        losses.append(loss)\n    scheduler.step()\n",
        "def evaluate(model, loader):\n    total = 0\n    for x, y in loader:\n        total += (model(x).argmax(1) == y).sum().item()\n    return total\n",
        "for x, y in val_loader:\n    preds = model(x)\n",
        "import numpy as np\nloss = torch.tensor(np.mean((model(x).detach().numpy() - y.numpy()) ** 2), requires_grad=True)\nloss.backward()\n",
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2).cuda()\n\n    def forward(self, x):\n        return self.fc(x)\n",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(IMPORTS, st.lists(STATEMENTS, min_size=1, max_size=8))
def test_fix_parses_and_is_idempotent_on_training_programs(imports, statements):
    source = (imports + "".join(statements)).encode()
    first = lint_module_source(source, ALL_RULES, FixMode.UNSAFE)
    parse(first.fixed_source)  # the fixed program still parses
    second = lint_module_source(first.fixed_source, ALL_RULES, FixMode.UNSAFE)
    assert second.fixed_source == first.fixed_source
    assert [f.code for f in second.findings] == [f.code for f in first.findings]
