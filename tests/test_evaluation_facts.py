"""The evaluation facet of the semantic model: which code evaluates, which module it runs,
whether that module is in eval mode and gradients are off there, and where fixes go."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.semantic import SemanticModel
from torchlint.semantic.names import is_model_name, words


def facts(source: str):
    wrapper = MetadataWrapper(cst.parse_module(textwrap.dedent(source)))
    return SemanticModel(wrapper).evaluation


def summary(evaluation) -> list[tuple[str, int, str]]:
    """(kind, row of the first forward pass, model) for every scope."""
    module = evaluation.model.module
    return [(s.kind, evaluation.model.wrapper.resolve(PositionProvider)[s.forwards[0]].start.line, module.code_for_node(s.model)) for s in evaluation.scopes]


def only_scope(source: str):
    evaluation = facts(source)
    assert len(evaluation.scopes) == 1, summary(evaluation)
    return evaluation, evaluation.scopes[0]


def code(evaluation, node) -> str:
    return evaluation.model.module.code_for_node(node).strip()


# --- names ------------------------------------------------------------------------------


def test_words_split_snake_and_camel_case():
    assert words("evaluateRandomly") == ["evaluate", "randomly"]
    assert words("X_test") == ["x", "test"]
    assert words("netG") == ["net", "g"]


@pytest.mark.parametrize("name", ["model", "net", "best_model", "model_ft", "resnet18", "netD", "encoder", "teacher"])
def test_model_names(name):
    assert is_model_name(name)


@pytest.mark.parametrize("name", ["criterion", "tokenizer", "transform", "clf", "dataset", "metric"])
def test_other_names(name):
    assert not is_model_name(name)


# --- scopes -----------------------------------------------------------------------------


def test_evaluation_function_with_a_model_parameter():
    evaluation = facts(
        """
        import torch

        def evaluate(model, loader):
            return [model(x).argmax(1) for x, _ in loader]
        """
    )
    assert summary(evaluation) == [("function", 5, "model")]


def test_loop_over_validation_data_in_a_training_function():
    evaluation = facts(
        """
        import torch

        def fit(model, opt, train_loader, val_loader):
            for epoch in range(3):
                for x, y in train_loader:
                    loss = model(x).sum()
                    loss.backward()
                    opt.step()
                for x, y in val_loader:
                    print(model(x).argmax(1))
        """
    )
    assert summary(evaluation) == [("loop", 11, "model")]


@pytest.mark.parametrize("iterable", ["testloader", 'dataloaders["val"]', "tqdm(valid_dl)", "zip(X_test, y_test)", 'get_loader("test")'])
def test_validation_and_test_data_spellings(iterable):
    evaluation = facts(
        f"""
        import torch.nn as nn
        net = nn.Linear(2, 2)
        for batch in {iterable}:
            print(net(batch).argmax(1))
        """
    )
    assert [s.kind for s in evaluation.scopes] == ["loop"]


def test_loop_over_a_list_of_split_names_is_not_data():
    evaluation = facts(
        """
        import torch.nn as nn
        net = nn.Linear(2, 2)
        for split in ["train", "val"]:
            net(batches[split])
        """
    )
    assert evaluation.scopes == []


def test_inference_after_loading_weights_and_on_test_data():
    evaluation = facts(
        """
        import torch
        from model import Net

        model = Net()
        model.load_state_dict(torch.load("w.pt"))
        out = model(x)
        more = model(y)
        classifier = Net()
        print(classifier(X_test))
        print(classifier(X_train))
        helper = Net()  # not known to be a module: no scope
        print(helper(X_test))
        """
    )
    assert summary(evaluation) == [("statement", 7, "model"), ("statement", 10, "classifier")]
    assert len(evaluation.scopes[0].forwards) == 2  # one scope per model and function


def test_loading_weights_before_training_is_not_inference():
    evaluation = facts(
        """
        import torch
        model = torch.nn.Linear(2, 2)
        model.load_state_dict(torch.load("resume.pt"))
        out = model(x)
        out.sum().backward()
        """
    )
    assert evaluation.scopes == []


@pytest.mark.parametrize(
    "source",
    [
        # trains
        "def test(model, loader, opt):\n    for x in loader:\n        model(x).sum().backward()\n        opt.step()\n",
        # a pytest test
        "def test_shapes():\n    model = torch.nn.Linear(2, 2)\n    assert model(torch.ones(2)).shape == (2,)\n",
        # Lightning owns the mode
        "import lightning as L\nclass Lit(L.LightningModule):\n    def evaluate(self, batch):\n        return self.model(batch)\n",
        # the module's own method: its caller owns the mode
        "class Net(torch.nn.Module):\n    def predict(self, x):\n        return self(x)\n",
        # Pyro's `model` is a function, not a module
        "def model(data):\n    pass\n\ndef predict(data):\n    return model(data)\n",
        # not a model
        "def evaluate(metric, loader):\n    return [metric(x) for x in loader]\n",
    ],
)
def test_not_evaluation(source):
    assert facts("import torch\n" + source).scopes == []


def test_loop_free_predict_feeding_a_training_step_is_training():
    evaluation = facts(
        """
        import torch

        def predict(model, batch):
            return model(batch["x"])

        for batch in loader:
            out = predict(model, batch)
            loss = crit(out, batch["y"])
            loss.backward()
            opt.step()
        """
    )
    assert evaluation.scopes == []


def test_files_without_torch_have_no_evaluation_code():
    assert facts("def evaluate(model, loader):\n    return [model(x).argmax(1) for x in loader]\n").scopes == []


# --- eval mode --------------------------------------------------------------------------

TRAINING = """
import torch

def train_epoch(model, loader, opt):
    model.train()
    for x, y in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

def evaluate(model, loader):
    {body}
    return [model(x).argmax(1) for x, _ in loader]

def main(model, opt, train_loader, val_loader):
    for epoch in range(3):
        {epoch}
"""


@pytest.mark.parametrize(
    "body, epoch, in_eval",
    [
        ("model.eval()", "train_epoch(model, train_loader, opt); evaluate(model, val_loader)", True),
        ("model.train(False)", "train_epoch(model, train_loader, opt); evaluate(model, val_loader)", True),
        ("pass", "train_epoch(model, train_loader, opt); evaluate(model, val_loader)", False),
        ("pass", "train_epoch(model, train_loader, opt); model.eval(); evaluate(model, val_loader)", True),
        ("pass", "model.eval(); train_epoch(model, train_loader, opt); evaluate(model, val_loader)", False),
        ("model.train()  # Monte Carlo dropout", "evaluate(model, val_loader)", True),
    ],
)
def test_eval_mode_in_scope_and_at_callers(body, epoch, in_eval):
    evaluation, scope = only_scope(TRAINING.format(body=body, epoch=epoch))
    assert evaluation.in_eval_mode(scope) is in_eval


def test_eval_mode_through_a_chain_of_callers():
    evaluation, scope = only_scope(
        """
        import torch

        def evaluate(encoder, sentence):
            return encoder(sentence)

        def evaluate_randomly(encoder, pairs):
            for pair in pairs:
                evaluate(encoder, pair)

        encoder.eval()
        evaluate_randomly(encoder, pairs)
        """
    )
    assert evaluation.in_eval_mode(scope)


def test_a_model_only_ever_put_in_eval_mode():
    evaluation, scope = only_scope(
        """
        import torch

        class Predictor:
            def __init__(self, model):
                self.model = model
                self.model.eval()

            def predict(self, x):
                return self.model(x).argmax(1)
        """
    )
    assert evaluation.in_eval_mode(scope)


def test_a_function_passed_as_a_callback_has_unknown_callers():
    evaluation, scope = only_scope(
        """
        import torch

        def validate(model, loader):
            return [model(x).argmax(1) for x in loader]

        trainer = Trainer(eval_fn=validate)
        """
    )
    assert evaluation.in_eval_mode(scope)


def test_a_function_nobody_calls_is_not_in_eval_mode():
    evaluation, scope = only_scope("import torch\ndef predict(model, x):\n    return model(x).argmax(1)\n")
    assert not evaluation.in_eval_mode(scope)


# --- gradients --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, disabled",
    [
        ("@torch.no_grad()\ndef evaluate(model, loader):\n    return [model(x).argmax(1) for x in loader]\n", True),
        ("@torch.inference_mode()\ndef evaluate(model, loader):\n    return [model(x).argmax(1) for x in loader]\n", True),
        ("def evaluate(model, loader):\n    with torch.no_grad():\n        return [model(x).argmax(1) for x in loader]\n", True),
        ("def evaluate(model, loader):\n    torch.set_grad_enabled(False)\n    return [model(x).argmax(1) for x in loader]\n", True),
        ("def evaluate(model, loader):\n    with torch.set_grad_enabled(phase == 'train'):\n        return [model(x).argmax(1) for x in loader]\n", True),
        ("def evaluate(model, loader):\n    with torch.set_grad_enabled(True):\n        return [model(x).argmax(1) for x in loader]\n", False),
        ("def evaluate(model, loader):\n    torch.no_grad()  # does nothing\n    return [model(x).argmax(1) for x in loader]\n", False),
        ("def evaluate(model, loader):\n    return [model(x).argmax(1) for x in loader]\n\nwith torch.no_grad():\n    evaluate(m, l)\n", True),
        ("def evaluate(model, loader):\n    return [model(x).argmax(1) for x in loader]\n\nwith torch.no_grad():\n    evaluate(m, l)\nevaluate(m, l)\n", False),
        ("from torch import no_grad as ng\n@ng()\ndef evaluate(model, loader):\n    return [model(x).argmax(1) for x in loader]\n", True),
    ],
)
def test_grad_disabled(source, disabled):
    evaluation, scope = only_scope("import torch\n" + source)
    assert evaluation.grad_disabled(scope.forwards[0]) is disabled


@pytest.mark.parametrize(
    "imports, call, needs_import",
    [
        ("import torch", "torch.no_grad()", False),
        ("import torch as th", "th.no_grad()", False),
        ("import torch.nn as nn\nimport torch.nn", "torch.no_grad()", False),
        ("from torch import no_grad", "no_grad()", False),
        ("from torch import nn", "torch.no_grad()", True),
    ],
)
def test_no_grad_call_uses_the_files_own_names(imports, call, needs_import):
    assert facts(imports + "\n").no_grad_call == (call, needs_import)


# --- modules and fixes ------------------------------------------------------------------


def test_a_parameter_a_caller_passes_a_known_module_to():
    evaluation, scope = only_scope(
        """
        import torch.nn as nn

        def evaluate(m, data):
            return [m(x) for x in data]

        evaluate(nn.Linear(2, 2), data)
        """
    )
    assert code(evaluation, scope.model) == "m"


def test_train_mode_restored_after_evaluation_in_an_epoch_loop():
    evaluation, scope = only_scope(
        """
        import torch

        def validate(net, loader):
            return [net(x) for x, _ in loader]

        for epoch in range(3):
            for x, y in train_loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            acc = validate(model, val_loader)
        """
    )
    [(statement, restored)] = evaluation.train_restores(scope)
    assert (code(evaluation, statement), restored) == ("acc = validate(model, val_loader)", "model")
    assert code(evaluation, evaluation.eval_insertion(scope)) == "return [net(x) for x, _ in loader]"


def test_no_restore_when_the_training_pass_switches_back():
    evaluation, scope = only_scope(TRAINING.format(body="pass", epoch="train_epoch(model, train_loader, opt); evaluate(model, val_loader)"))
    assert evaluation.train_restores(scope) == []


def test_anchor_widens_to_loops_and_with_blocks_that_do_not_train():
    evaluation, scope = only_scope(
        """
        import torch
        model = torch.nn.Linear(2, 2)
        model.load_state_dict(torch.load("w.pt"))
        with open("out.txt", "w") as f:
            for path in paths:
                f.write(str(model(load(path))))
        """
    )
    assert code(evaluation, scope.node).startswith("with open")


# --- layers that train mode changes -------------------------------------------------------

_MLP = """
import torch
from torch import nn

def conv_block(c):
    return nn.Sequential(nn.Conv2d(c, c, 3), nn.ReLU())

class MLP(nn.Module):
    def __init__(self, hidden, cfg):
        super().__init__()
        layers = []
        for _ in range(cfg.get("depth", 2)):
            layers.append(nn.Linear(hidden, hidden))
        self.body = nn.Sequential(*layers)
        self.conv = conv_block(hidden)
    def forward(self, x):
        for layer in self.body:
            x = torch.relu(layer(x))
        return self.conv(x)
"""


@pytest.mark.parametrize(
    "build, free",
    [
        ("model = MLP(8, {}).to('cpu')", True),
        ("model = nn.Linear(2, 1)", True),
        ("model = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))", True),
        ("model = nn.Sequential(nn.Linear(2, 4), nn.Dropout(0.1))", False),
        ("model = nn.LSTM(2, 4, 2, dropout=0.3)", False),
        ("model = nn.TransformerEncoderLayer(8, 2)", False),
        ("model = nn.Sequential(*layers)", False),  # contents unknown
        ("model = torchvision.models.resnet18()", False),
        ("model = torch.load('m.pt')", False),
    ],
)
def test_known_mode_free(build, free):
    evaluation = facts(f"import torchvision\n{_MLP}\n{build}\nwith torch.no_grad():\n    print(model(x_test))\n")
    scope = evaluation.scopes[-1]
    assert evaluation.known_mode_free(scope.model, scope.function) is free


@pytest.mark.parametrize(
    "change",
    [
        ("nn.Linear(hidden, hidden)", "nn.BatchNorm1d(hidden)"),  # a layer added in a loop
        ("torch.relu(layer(x))", "nn.functional.dropout(layer(x), 0.1, self.training)"),
        ("return self.conv(x)", "return self.conv(x) if self.training else x"),
        ("nn.ReLU()", "norm(c)"),  # an unknown builder
        ("class MLP(nn.Module):", "class MLP(Base):"),  # a base class from another file
    ],
)
def test_a_local_class_with_mode_layers_or_unknown_parts(change):
    source = _MLP.replace(*change)
    evaluation = facts(f"from base import Base, norm\n{source}\nmodel = MLP(8, {{}})\nwith torch.no_grad():\n    print(model(x_test))\n")
    scope = evaluation.scopes[-1]
    assert not evaluation.known_mode_free(scope.model, scope.function)


def test_mode_free_through_an_evaluation_functions_callers():
    evaluation = facts(
        _MLP
        + """
def evaluate(net, loader):
    return [net(x) for x in loader]

evaluate(MLP(4, {}), val_loader)
evaluate(nn.Linear(4, 4), test_loader)
"""
    )
    scope = evaluation.scopes[-1]
    assert evaluation.known_mode_free(scope.model, scope.function)


# --- recall shapes and what they leave alone ---------------------------------------------


def test_generation_function_called_outside_training_is_evaluation():
    evaluation, scope = only_scope(
        """
        import torch

        def sample(model, n):
            return model(torch.randn(n, 8))

        model = torch.load("g.pt", weights_only=False)
        images = sample(model, 16)
        """
    )
    assert (scope.kind, scope.core) == ("function", False)


def test_generation_function_called_in_a_training_loop_is_not_evaluation():
    evaluation = facts(
        """
        import torch

        def sample(generator, n):
            return generator(torch.randn(n, 8))

        for x in loader:
            opt.zero_grad()
            loss = -critic(generator(x)).mean()
            loss.backward()
            opt.step()
            save(sample(generator, 4))
        """
    )
    assert summary(evaluation) == []


def test_helper_reached_only_from_evaluation():
    evaluation, scope = only_scope(
        """
        import torch

        def decode(model, src):
            return model(src).argmax(-1)

        def evaluate(model, loader):
            return [decode(model, x) for x, _ in loader]
        """
    )
    assert code(evaluation, scope.node).startswith("def decode") and not scope.core


def test_plain_functions_are_not_modules():
    evaluation = facts(
        """
        import torch

        def linreg(X, w, b):
            return X @ w + b

        def evaluate(net, loader):
            return [net(x, w, b) for x, _ in loader]

        net = linreg
        print(net(X_test, w, b), evaluate(linreg, val_loader))
        """
    )
    assert summary(evaluation) == []


def test_a_no_grad_decorator_does_not_cover_a_coroutine():
    evaluation, scope = only_scope(
        """
        import torch

        @torch.no_grad()
        async def predict(model, x):
            return model(await x).argmax(1)
        """
    )
    assert not evaluation.grad_disabled(scope.forwards[0])
