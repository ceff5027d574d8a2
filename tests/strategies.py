"""Hypothesis strategies that write PyTorch training code from its idioms.

A program is a header of imports (with the aliases people use: `import torch as th`,
`from torch import nn, optim`) and top-level items: setup statements, training and
evaluation loops, helper functions (some decorated with `@torch.no_grad()`) and their calls,
`nn.Module` subclasses. Loops, `with torch.no_grad()`, `autocast` and `if` blocks nest in
random orders and depths, and their bodies draw from the idioms of a training step:
`zero_grad`, forward, loss, `backward`, `step`, schedulers, gradient scaling, `eval`/`train`,
device moves, `torch.save`/`torch.load`, NumPy, losses kept in lists. The fragments are
written with `{t}`, `{nn}`, `{optim}`, `{np}` and `{F}` for the module names, filled in with
the program's own aliases.

A notebook spreads a program over code cells, with markdown between them and IPython's own
syntax around them: line magics, shell escapes, help lines, `%%time`, a cell indented as a
whole, and a value displayed at the end of a cell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import strategies as st

# (import lines, the names they bind for {t}, {nn}, {optim}, {np}, {F})
IMPORT_STYLES = [
    (
        "import numpy as np\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport torch.optim as optim\n",
        dict(t="torch", nn="nn", optim="optim", np="np", F="F"),
    ),
    (
        "import numpy\nimport torch as th\nfrom torch import nn, optim\nfrom torch.nn import functional as fn\n",
        dict(t="th", nn="nn", optim="optim", np="numpy", F="fn"),
    ),
    (
        "import numpy as np\nimport torch\n",
        dict(t="torch", nn="torch.nn", optim="torch.optim", np="np", F="torch.nn.functional"),
    ),
]

SETUP = [
    "device = {t}.device('cuda' if {t}.cuda.is_available() else 'cpu')",
    "device = 'cuda'",
    "model = {nn}.Linear(4, 2)",
    "model = {nn}.Sequential({nn}.Linear(4, 8), {nn}.Dropout(0.1), {nn}.BatchNorm1d(8), {nn}.Linear(8, 2))",
    "model = Net()",
    "model = model.to(device)",
    "model = model.cuda()",
    "model.cuda()",
    "optimizer = {optim}.SGD(model.parameters(), lr=0.1)",
    "optimizer = {optim}.Adam(model.parameters(), lr=1e-3)",
    "criterion = {nn}.CrossEntropyLoss()",
    "scheduler = {optim}.lr_scheduler.ReduceLROnPlateau(optimizer)",
    "scheduler = {optim}.lr_scheduler.StepLR(optimizer, step_size=10)",
    "scaler = {t}.cuda.amp.GradScaler()",
    "losses = []",
    "total = 0.0",
    "loader = {t}.utils.data.DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2)",
    "state = {t}.load('model.pt')",
    "model.load_state_dict({t}.load('model.pt', map_location='cpu'))",
    "model = {t}.load('model.pt', weights_only=False)",
    "{t}.save(model, 'model.pt')",
    "{t}.save(model.state_dict(), 'model.pt')",
    "compiled = {t}.compile(model)",
    "{t}.save(compiled.state_dict(), 'compiled.pt')",
]

STEP = [
    "optimizer.zero_grad()",
    "optimizer.zero_grad(set_to_none=True)",
    "out = model(x)",
    "loss = criterion(out, y)",
    "loss = criterion(model(x), y)",
    "loss = {F}.cross_entropy(model(x), y)",
    "loss = {t}.tensor({np}.mean((out.detach().numpy() - y.numpy()) ** 2), requires_grad=True)",
    "loss.backward()",
    "optimizer.step()",
    "scheduler.step()",
    "scheduler.step(loss)",
    "losses.append(loss)",
    "losses.append(loss.item())",
    "total += loss",
    "total += loss.item()",
    "x, y = x.to(device), y.to(device)",
    "x = x.cuda()",
    "x.cuda()",
    "y.to(device)",
    "scaler.scale(loss).backward()",
    "scaler.step(optimizer)",
    "scaler.update()",
    "model.eval()",
    "model.train()",
    "preds = model(x).argmax(1)",
    "out = model.forward(x)",
    "model(x)",
    "print(loss.item())",
    "{t}.save(model, f'epoch_{{epoch}}.pt')",
]

BLOCKS = [
    "for epoch in range(3):",
    "for x, y in loader:",
    "for i, (x, y) in enumerate(train_loader):",
    "for x, y in val_loader:",
    "for x, y in test_loader:",
    "while total < 10:",
    "with {t}.no_grad():",
    "with {t}.inference_mode():",
    "with {t}.cuda.amp.autocast():",
    "with {t}.autocast('cuda', dtype={t}.float16):",
    "if epoch % 2 == 0:",
]

FUNCTIONS = [
    "def train_one_epoch(model, loader, optimizer, criterion):",
    "def evaluate(model, loader):",
    "def validate(model, val_loader, device):",
    "@{t}.no_grad()\ndef predict(model, x):",
    "def fit(epochs):",
]

CALLS = [
    "train_one_epoch(model, loader, optimizer, criterion)",
    "acc = evaluate(model, val_loader)",
    "evaluate(model, val_loader)",
    "validate(model, val_loader, device)",
    "preds = predict(model, x)",
    "fit(3)",
]

RETURNS = ["return loss", "return total", "return model(x)", "return losses"]


@dataclass(frozen=True)
class Block:
    header: str
    body: tuple  # of str and Block


def render(node: str | Block, depth: int = 0) -> str:
    if isinstance(node, str):
        return "".join("    " * depth + line + "\n" for line in node.split("\n"))
    return render(node.header, depth) + "".join(render(child, depth + 1) for child in node.body)


def statements(leaves: list[str], max_leaves: int = 8) -> st.SearchStrategy:
    """A statement or a block of statements, nested to a random depth."""
    return st.recursive(
        st.sampled_from(leaves),
        lambda children: st.builds(Block, st.sampled_from(BLOCKS), st.lists(children, min_size=1, max_size=4).map(tuple)),
        max_leaves=max_leaves,
    )


def bodies(leaves: list[str]) -> st.SearchStrategy:
    return st.lists(statements(leaves, max_leaves=6), min_size=1, max_size=4).map(tuple)


FUNCTION = st.builds(
    lambda header, body, tail: Block(header, body + tail),
    st.sampled_from(FUNCTIONS),
    bodies(STEP + SETUP[:4]),
    st.lists(st.sampled_from(RETURNS), max_size=1).map(tuple),
)

INIT_BODY = [
    "self.fc = {nn}.Linear(4, 2)",
    "self.fc = {nn}.Linear(4, 2).cuda()",
    "self.drop = {nn}.Dropout(0.5)",
    "self.register_buffer('scale', {t}.ones(1))",
]
FORWARD_BODY = ["x = self.fc(x)", "x = x.cuda()", "x = x.to(x.device)", "x = self.drop(x)", "x = {t}.relu(x)", "x = x.to('cuda')"]


@st.composite
def modules(draw) -> Block:
    """An `nn.Module` subclass, with or without `super().__init__()`, moving tensors in forward."""
    init = draw(st.lists(st.sampled_from(INIT_BODY), min_size=1, max_size=3))
    if draw(st.booleans()):
        init.insert(draw(st.integers(0, len(init))), "super().__init__()")
    docstring = ['"""A small network."""'] if draw(st.booleans()) else []
    forward = draw(st.lists(st.sampled_from(FORWARD_BODY), max_size=3)) + ["return x"]
    return Block(
        "class Net({nn}.Module):",
        (*docstring, Block("def __init__(self):", tuple(init)), Block("def forward(self, x):", tuple(forward))),
    )


TOP_LEVEL = st.one_of(
    statements(SETUP + STEP),
    statements(SETUP, max_leaves=4),
    FUNCTION,
    modules(),
    st.sampled_from(CALLS),
)


@dataclass(frozen=True)
class Program:
    imports: str
    names: dict
    items: tuple  # of str and Block

    def chunks(self) -> list[str]:
        """The imports, then each top-level item, as source text."""
        return [self.imports] + [render(item).format(**self.names) for item in self.items]

    @property
    def source(self) -> str:
        return "".join(self.chunks())


# Idioms in any order and nesting: what rules meet in code that is half written or unusual.
scrambled_programs = st.builds(
    lambda style, items: Program(style[0], style[1], tuple(items)),
    st.sampled_from(IMPORT_STYLES),
    st.lists(TOP_LEVEL, min_size=1, max_size=5),
)

TRAIN_STEP = [
    "optimizer.zero_grad()",
    "x, y = x.to(device), y.to(device)",
    "out = model(x)",
    "loss = criterion(out, y)",
    "loss.backward()",
    "optimizer.step()",
    "losses.append(loss)",
    "total += loss.item()",
]
EVAL_STEP = ["out = model(x)", "preds = out.argmax(1)", "x = x.cuda()", "correct += (preds == y).sum().item()"]


def _shuffled_subset(items: list[str]) -> st.SearchStrategy:
    return st.lists(st.sampled_from(items), min_size=1, max_size=len(items), unique=True).flatmap(st.permutations)


@st.composite
def training_scripts(draw) -> Program:
    """A training script's shape (setup, epochs of training, evaluation, saving) with its steps
    dropped, reordered and wrapped at random, and its epoch body sometimes in a helper."""
    style = draw(st.sampled_from(IMPORT_STYLES))
    items: list = [draw(modules())] if draw(st.booleans()) else []
    chosen = draw(st.lists(st.integers(0, 15), min_size=2, max_size=6, unique=True))
    items += [SETUP[index] for index in sorted(chosen)]  # in the order a script sets things up
    wrap = st.sampled_from([None, "with {t}.no_grad():", "with {t}.cuda.amp.autocast():", "if epoch % 2 == 0:"])
    train_step = list(draw(_shuffled_subset(TRAIN_STEP)))
    header = draw(wrap)
    if header and len(train_step) > 1:
        cut = draw(st.integers(1, len(train_step) - 1))
        train_step = train_step[:cut] + [Block(header, tuple(train_step[cut:]))]
    train_loop = Block("for x, y in train_loader:", tuple(train_step))
    epoch = [draw(st.sampled_from(["model.train()", "pass"])), train_loop]
    if draw(st.booleans()):
        evaluation = Block("for x, y in val_loader:", tuple(draw(_shuffled_subset(EVAL_STEP))))
        if draw(st.booleans()):
            evaluation = Block("with {t}.no_grad():", (evaluation,))
        epoch += [draw(st.sampled_from(["model.eval()", "correct = 0"])), evaluation]
    epoch += draw(st.lists(st.sampled_from(["scheduler.step()", "scheduler.step(total)", "{t}.save(model, 'last.pt')"]), max_size=2))
    if draw(st.booleans()):
        items += [Block("def train_one_epoch(model, train_loader, optimizer, criterion):", tuple(epoch)),
                  Block("for epoch in range(3):", ("train_one_epoch(model, train_loader, optimizer, criterion)",))]
    else:
        items.append(Block("for epoch in range(3):", tuple(epoch)))
    items += draw(st.lists(st.sampled_from(SETUP[16:] + CALLS[1:3]), max_size=2))
    return Program(style[0], style[1], tuple(items))


programs = st.one_of(training_scripts(), scrambled_programs)

IPYTHON_LINES = [
    "%matplotlib inline",
    "!nvidia-smi",
    "!pip install -q torchvision \\\n    tqdm",
    "files = !ls *.pt",
    "model?",
    "torch.*Tensor?",
    "??nn.Linear",
    "%time out = model(x)",
]


@st.composite
def notebooks(draw) -> bytes:
    """A program spread over the code cells of a notebook, with IPython syntax around it."""
    chunks = draw(programs).chunks()
    cuts = sorted(draw(st.sets(st.integers(1, len(chunks) - 1), max_size=len(chunks) - 1))) if len(chunks) > 1 else []
    cells = []
    for start, end in zip([0, *cuts], [*cuts, len(chunks)]):
        source = "".join(chunks[start:end])
        if draw(st.booleans()):
            source = draw(st.sampled_from(IPYTHON_LINES)) + "\n" + source
        if draw(st.booleans()):
            source += draw(st.sampled_from(["model", "model(x)", "loss.item()", "x.to(device)", "losses[-1];"])) + "\n"
        if draw(st.integers(0, 4)) == 0:
            source = "%%time\n" + source
        if draw(st.integers(0, 4)) == 0:
            source = "".join("  " + line if line.strip() else line for line in source.splitlines(keepends=True))
        if draw(st.booleans()):
            source = source.rstrip("\n")  # Jupyter stores a cell's last line without a newline
        if draw(st.integers(0, 3)) == 0:
            cells.append({"cell_type": "markdown", "metadata": {}, "source": ["Next step\n"]})
        cells.append(
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source.splitlines(keepends=True)}
        )
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return (json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode()
