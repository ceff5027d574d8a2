import libcst as cst

from torchlint.rule import STAR_IMPORT, Applicability, Fix
from torchlint.semantic.execution_order import with_import_first
from torchlint.semantic.forward import called_module
from torchlint.torch_rule import TorchRule


class InferenceWithGrad(TorchRule):
    """
    ## What it does
    Finds evaluation or inference code (the same code as TL401: evaluation functions, loops
    over validation or test data, inference after loading weights, a Hugging Face
    `from_pretrained` included, or after `model.eval()`) that runs a model with
    gradients enabled: no `torch.no_grad()`, `torch.inference_mode()` or
    `torch.set_grad_enabled(False)` around it, as a `with` block, a decorator or a statement,
    there or at every call of the evaluation function in the file. It also covers
    generation functions (`generate`, `sample`, `decode`) called in the file outside any
    training loop, and helpers (decoders, samplers) called only from evaluation code. A pass
    of a model after the training loop of the same function that trains it (between epochs
    too, on noise too: a prediction or a sample printed or plotted) is evaluation too.
    A method of an `nn.Module` subclass other than `forward` (a model's `tile_predict` or
    `encode_features`) is reported where it runs the module or its submodules
    (`self.forward(x)`, `self.encoder(x)`) and ends what they give within itself (`.data`,
    NumPy, `.item()`), with gradients on at its calls, in this file and in the project's
    other files (none seen: on). A method whose output is returned is left to its callers.
    Lightning's evaluation hooks are left alone (the framework turns gradients off), and so
    are plain functions used as models, `torch.nn` modules without parameters
    (`nn.CosineSimilarity`, `nn.Softmax`: functions of their inputs), tests, forward passes
    on made-up tensors (`torch.rand(...)`) after
    loading weights, forward passes whose output only has its shape read (a model file's
    `test()` printing `net(torch.randn(...)).size()`, a notebook's
    `out, h = rnn(test_input, None)` checking `out.size()` and `h.size()`), and functions
    passed by name or called from one (a forward function given to an attribution method,
    which differentiates its output).

    Inside a training iteration, a second pass of the module the iteration trains whose
    output provably never reaches a backward pass (a validation forward on held-out data no
    name marks, a probe printed beside the training) is inference too; such a pass says
    nothing of the mode (a training-accuracy pass may want train mode), so TL401 leaves it.
    A module known to hold no parameters (a parameter-free `torch.nn` layer, a class of the
    file whose `__init__` builds nothing) builds no graph of its own and is not reported.
    A forward pass is reported only when its output provably never reaches a backward pass
    (the semantic layer's gradient flow): not through a loss, a running total, a list or an
    attribute that is later backpropagated, a same-file helper that calls `backward()`, or a
    `return` to a caller that does (or that returns it on: its callers are not followed).
    A value handed to a part of another object (`for layer in self.lm.layers():
    layer.condition(v)`) reaches that object and what calling it computes; one handed to the
    caller's objects (`sentence.set_embedding(v)` over a parameter) cannot be followed. Where the output cannot be followed (returned by a
    function with no caller in the file or one passed around by name, yielded, thrown away
    as a warm-up or for its forward hooks), the rule stays silent: a name such as `predict`
    or `evaluate` never makes a pass inference on its own.

    ## Why is this bad?
    With gradients on, every forward pass records its autograd graph and keeps all
    activations for a backward pass that never comes: evaluation uses several times the
    memory it needs (often the cause of out-of-memory errors at validation time) and runs
    slower. Any output that is kept also keeps its graph alive.

    ## Example
    ```python
    def evaluate(model, loader):
        model.eval()
        return [model(x).argmax(1) for x, _ in loader]
    ```

    ## Use instead
    ```python
    @torch.no_grad()
    def evaluate(model, loader):
        model.eval()
        return [model(x).argmax(1) for x, _ in loader]
    ```

    ## Fix safety
    The fix decorates an evaluation function with `@torch.no_grad()` (innermost, next to
    `def`), or wraps an evaluation loop or inference statements in `with torch.no_grad():`,
    using the file's own name for it (`th.no_grad()` after `import torch as th`) and adding
    `import torch` where the file has none; where the file's name for it is bound only after
    the code it wraps (a notebook cell before the one that imports torch), the fix adds the
    file's own import of that name at the start of that cell, after the cell's own imports,
    unless a function there binds the name itself (then there is no fix). It is safe:
    evaluation code that computes gradients (a backward pass or `torch.autograd.grad` there)
    is never reported, so only the recorded graphs go. The decorator turns gradients off for
    the whole function, so it is offered only where every forward pass there is inference;
    beside one whose output may be backpropagated, the inference statements are wrapped
    instead. Where an inference output is returned, what the callers do with it is read
    where the fix cannot see every reader (another file, a method's callers): the fix is
    then unsafe. A decorator on an `async def` does not cover the coroutine's body (and does
    not count as turning gradients off there): the statements that run the model are wrapped
    instead, and there is no fix where they `await`, since grad mode is per thread and other
    coroutines would run with it off.

    ## References
    - [`torch.no_grad`](https://pytorch.org/docs/stable/generated/torch.no_grad.html)
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)
    """

    code = "TL402"
    name = "inference-with-grad"
    required_words = (("torch", "torchvision", "pytorch_lightning", "lightning", "timm", STAR_IMPORT),)
    message = "evaluation runs `{model}` with gradients enabled; use `torch.no_grad()` or `torch.inference_mode()`"

    def leave_Module(self, original_node: cst.Module) -> None:
        evaluation = self.semantic.evaluation
        for scope in evaluation.scopes:
            if scope.mode_only:
                continue  # found as evidence of the mode alone (TL401)
            if scope.kind == "function" and evaluation.reached_from_callback(scope.node):
                continue  # its output may be differentiated by whatever it is passed to
            with_grad = [f for f in scope.forwards if not evaluation.grad_disabled(f)]
            if not with_grad or evaluation.parameter_free(called_module(with_grad[0]), scope.function):
                continue  # (a module with no parameters builds no graph of its own)
            model = self.context.module.code_for_node(called_module(with_grad[0]))
            self.report(with_grad[0], self.message.format(model=model), fix=self._fix(scope, with_grad))

    def _fix(self, scope, with_grad: list[cst.Call]) -> Fix | None:
        evaluation = self.semantic.evaluation
        no_grad, needs_import = evaluation.no_grad_call
        changes: dict[cst.CSTNode, cst.CSTNode] = {}
        flow = self.semantic.gradient_flow
        # What a caller gets back is read where the fix cannot see every reader.
        applicability = Applicability.UNSAFE if any(flow.returned(f) for f in with_grad) else Applicability.SAFE
        if scope.kind == "function" and scope.node.asynchronous is None and not scope.beside_training:
            decorator = cst.Decorator(cst.parse_expression(no_grad))
            changes[scope.node] = scope.node.with_changes(decorators=[*scope.node.decorators, decorator])
            message = f"Decorate `{scope.node.name.value}` with `@{no_grad}`"
        else:
            start = scope.node if scope.kind == "loop" else None
            for forward in with_grad:
                statement = evaluation.anchor(start or forward, scope.model, scope.function)
                if _awaits(statement):
                    return None  # grad mode is per thread: other coroutines would run with it off
                changes.setdefault(statement, _wrapped(statement, no_grad))
            message = f"Wrap in `with {no_grad}:`"
        if not needs_import:
            # The file's name for it must exist where the decorator or `with` runs (a
            # notebook's cell before the one that imports torch: the import is added there).
            name = no_grad.split(".")[0].split("(")[0]
            changes = with_import_first(self.semantic, changes, name, list(changes))
            if changes is None:
                return None
        else:
            first = evaluation.import_insertion()
            if first is None or first in changes:
                return None
            imported = cst.parse_statement("import torch\n").with_changes(leading_lines=first.leading_lines)
            changes[first] = cst.FlattenSentinel([imported, first.with_changes(leading_lines=())])
        return Fix(message, changes, applicability)


def _wrapped(statement: cst.BaseStatement, no_grad: str) -> cst.With:
    return cst.With(
        items=[cst.WithItem(cst.parse_expression(no_grad))],
        body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=())]),
        leading_lines=statement.leading_lines,
    )


def _awaits(statement: cst.BaseStatement) -> bool:
    found = False

    class Awaits(cst.CSTVisitor):
        def visit_Await(self, node: cst.Await) -> None:
            nonlocal found
            found = True

        def visit_For(self, node: cst.For) -> None:
            nonlocal found
            found = found or node.asynchronous is not None

        def visit_With(self, node: cst.With) -> None:
            nonlocal found
            found = found or node.asynchronous is not None

    statement.visit(Awaits())
    return found
