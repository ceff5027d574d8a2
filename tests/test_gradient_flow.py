"""The gradient-flow facet: whether a forward pass's output can reach a backward pass
(``REACHES``), provably never does (``NEVER``: inference), or cannot be followed
(``UNKNOWN``). Each case marks the row of the forward pass asked about with ``# <-``, followed
by what it calls where that is not ``model``."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.semantic import SemanticModel
from torchlint.semantic.gradflow import NEVER, REACHES, UNKNOWN


def flow(source: str) -> tuple[str, bool]:
    source = textwrap.dedent(source)
    wrapper = MetadataWrapper(cst.parse_module(source))
    model = SemanticModel(wrapper)
    row, line = next((i, line) for i, line in enumerate(source.splitlines(), 1) if "# <-" in line)
    callee = line.split("# <-")[1].strip() or "model"
    positions = wrapper.resolve(PositionProvider)
    call = next(c for c in model.calls_in() if model.module.code_for_node(c.func) == callee and positions[c].start.line == row)
    facet = model.gradient_flow
    return facet.of(call), facet.returned(call)


CASES = {
    "loss backpropagated": (REACHES, """
        out = model(x)  # <-
        loss = criterion(out, y)
        loss.backward()
    """),
    "a metric through item()": (NEVER, """
        out = model(x)  # <-
        acc = (out.argmax(1) == y).float().mean().item()
        print(f"{acc:.2f}", out.shape)
    """),
    "a functional loss's module does not carry the value": (NEVER, """
        import torch.nn.functional as F
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            loss.backward()
        for x, y in val_loader:
            val = F.cross_entropy(model(x), y)  # <-
            print(val.item())
    """),
    "a functional loss through a module's attribute chain does not carry the value": (NEVER, """
        import torch.nn as nn
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
        for x, y in val_loader:
            val = nn.functional.cross_entropy(model(x), y)  # <-
            print(val.item())
    """),
    "an object's attribute chain given the value still holds it": (REACHES, """
        for x, y in val_loader:
            args.history.append(model(x))  # <-
        loss = args.history[0].sum()
        loss.backward()
    """),
    "recurrent state passed back in returns to its own call, not to training's": (NEVER, """
        import torch.nn as nn

        class LM(nn.Module):
            def forward(self, x, state=None):
                h, state = self.rnn(x, state)
                return self.out(h), state

        model = LM()
        for epoch in range(3):
            state = None
            for x, y in train_loader:
                out, state = model(x, state)
                out.sum().backward()
            state = None
            for x, y in val_loader:
                out, state = model(x, state)  # <-
                print(out.argmax(1))
    """),
    "recurrent state carried from evaluation into training reaches it": (REACHES, """
        import torch.nn as nn

        class LM(nn.Module):
            def forward(self, x, state=None):
                h, state = self.rnn(x, state)
                return self.out(h), state

        model = LM()
        state = None
        for x, y in val_loader:
            out, state = model(x, state)  # <-
        for x, y in train_loader:
            out, state = model(x, state)
            out.sum().backward()
    """),
    "the same names rebound by training later in the epoch": (NEVER, """
        for epoch in range(3):
            for x, y in val_loader:
                out = model(x)  # <-
                loss = criterion(out, y)
                total = loss.item()
            for x, y in train_loader:
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
    """),
    "a rebinding on one branch only does not hide the first value": (REACHES, """
        out = model(x)  # <-
        if refine:
            out = other(x)
        out.sum().backward()
    """),
    "the previous iteration's output read before the rebinding": (REACHES, """
        previous = None
        for x in batches:
            if previous is not None:
                previous.sum().backward()
            previous = model(x)  # <-
    """),
    "a running total backpropagated": (REACHES, """
        total = 0
        for x, y in loader:
            total += criterion(model(x), y)  # <-
        total.backward()
    """),
    "a list summed into the loss (REINFORCE)": (REACHES, """
        log_probs = []
        for state in states:
            log_probs.append(policy(state).log_softmax(-1)[0])  # <- policy
        loss = -torch.stack(log_probs).sum()
        loss.backward()
    """),
    "an attribute read elsewhere in the file": (REACHES, """
        class Agent:
            def act(self, state):
                self.saved.append(self.policy(state))  # <- self.policy
                return 0

            def update(self):
                torch.stack(self.saved).sum().backward()
    """),
    "returned to a caller that backpropagates": (REACHES, """
        def predict(model, x):
            return model(x)  # <-

        loss = criterion(predict(net, x), y)
        loss.backward()
    """),
    "returned to a caller that reads a metric": (NEVER, """
        def predict(model, x):
            return model(x)  # <-

        print(predict(net, x).argmax(1).tolist())
    """),
    "returned with no caller in the file": (UNKNOWN, """
        def predict(model, x):
            return model(x)  # <-
    """),
    "a function passed around by name": (UNKNOWN, """
        def predict(model, x):
            return model(x)  # <-

        print(predict(net, x).argmax(1))
        trainer = Trainer(forward_fn=predict)
    """),
    "a yield": (UNKNOWN, """
        def outputs(model, loader):
            for x in loader:
                yield model(x)  # <-
    """),
    "thrown away: run for its hooks": (UNKNOWN, """
        model(x)  # <-
        loss = sum(hook.loss for hook in hooks)
        loss.backward()
    """),
    "given to a helper of the file that backpropagates": (REACHES, """
        def step(output, target):
            criterion(output, target).backward()

        step(model(x), y)  # <-
    """),
    "given to another library's backward": (REACHES, """
        out = model(x)  # <-
        accelerator.backward(criterion(out, y))
    """),
    "differentiated by autograd.grad": (REACHES, """
        import torch
        out = model(x)  # <-
        grads = torch.autograd.grad(out.sum(), x)
    """),
    "under no_grad: no graph at all": (NEVER, """
        import torch
        with torch.no_grad():
            out = model(x)  # <-
        out.sum().backward()
    """),
    "stored in a buffer object that the update reads": (REACHES, """
        buffer = Buffer()
        for state in states:
            buffer.push(state, policy(state))  # <- policy
        batch = buffer.sample()
        criterion(batch).backward()
    """),
    "handed to a part of a module that its forward pass uses": (UNKNOWN, """
        import torch.nn as nn

        class Flamingo(nn.Module):
            def condition(self, images):
                vision = self.resampler(images)  # <- self.resampler
                for layer in self.lang_model.layers():
                    layer.condition_on(vision)

            def forward(self, images, text):
                self.condition(images)
                return self.lang_model(text)
    """),
    "kept in an element of a metric list, read for a metric": (NEVER, """
        meters = [Meter()]
        for x in loader:
            meter = meters[0]
            meter.add(model(x))  # <-
        print(meters[0].value().item())
    """),
    "set on the caller's objects": (UNKNOWN, """
        def embed(sentences):
            for index, sentence in enumerate(sentences):
                sentence.set_embedding(model(sentence.tensor))  # <-
    """),
    "returned from forward: module calls are its callers": (UNKNOWN, """
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                return self.body(x)  # <- self.body

            def predict(self, x):
                return self.forward(x).argmax(1).tolist()
    """),
    "scaled in a comprehension that rebinds the name, then given to a model that is returned": (UNKNOWN, """
        def apply_model(x):
            control = control_model(x)  # <- control_model
            control = [c * s for c, s in zip(control, scales)]
            return unet(x, control=control)
    """),
    "the hidden state given back to the call that made it": (NEVER, """
        hidden = init_hidden()
        prediction, _, hidden = model(x, hidden)  # <-
        print(criterion(prediction, y).item())
    """),
}


@pytest.mark.parametrize("name", list(CASES))
def test_flow(name):
    expected, source = CASES[name]
    assert flow(source)[0] == expected


def test_a_returned_output_is_known_to_leave_its_function():
    assert flow(CASES["returned to a caller that reads a metric"][1]) == (NEVER, True)
    assert flow(CASES["a metric through item()"][1]) == (NEVER, False)


def test_a_module_given_the_output_does_not_keep_it():
    """``model.test(z)`` computes from ``z`` (a probe's accuracy): the module is not a
    container of the value, and its own loss method in the training step is not a read of it."""
    source = """
        import torch

        class Encoder(torch.nn.Module):
            pass

        model = Encoder()

        def train():
            loss = model.loss(model(x))
            loss.backward()

        def test():
            z = model(x)  # <-
            return model.test(z).item()
    """
    assert flow(source)[0] == NEVER
