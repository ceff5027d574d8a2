import libcst as cst

from torchlint.rule import STAR_IMPORT, Applicability, Fix
from torchlint.torch_rule import TorchRule


class InferenceInTrainMode(TorchRule):
    """
    ## What it does
    Finds evaluation or inference code that runs a model with no `model.eval()` on the path:
    functions named for validation, testing or prediction, loops over validation or test
    data, inference after loading weights, and a pass of a model after the training loop
    that trains it, once training is over (a GAN's samples plotted after its training; not
    between epochs, where a sample in training mode may be the algorithm's). It is silent when `model.eval()` (or
    `model.train(False)`) comes earlier in the same function, or before every call of the
    evaluation function in the file, and on code whose framework sets the mode (Lightning's
    `validation_step`, `test_step`, `predict_step`; methods of `nn.Module` subclasses, whose
    callers set it, also when the base class is in another file), on plain functions used
    as models, and on tests. Generation functions (`generate`, `sample`, `decode`) called in
    the file outside any training loop, and helpers (decoders, samplers) called only from
    evaluation code, are reported too, as are functions whose forward passes through a
    module of a class of the file provably never reach a backward pass (the gradient flow
    that TL402 uses: an agent's action selection; there a network that only reads
    `self.training`, a noisy network exploring, acts in training mode on purpose).

    Two structures say so with no name: a pass with gradients off (`with torch.no_grad():`)
    outside any training iteration, in code that trains nothing there (an accuracy loop over
    the training data at the end of an epoch: `no_grad` is not `eval`), unless `model.train()`
    was called on purpose just before it (recomputing batch-norm statistics) or the input is
    made-up noise (a GAN's samples); and a pass, inside a training loop, of a module that loop
    does not train: none of its parameters is held by an optimizer of the file, nothing
    updates them (a momentum or EMA copy, a target network synced with `load_state_dict`, a
    module handed to any call) and nothing sets its mode (a frozen distillation teacher, a
    pretrained network computing targets). For these two the module must hold dropout or
    batch norm; a layer that only reads `self.training` (a noisy network exploring) does not
    count.

    It reports only a model known to hold a layer that train mode changes: built (in the file
    or, through the project index, in another file of the project) from a class whose own
    layers, bases or submodules hold dropout, batch norm, `RReLU` or a transformer layer, or
    read `self.training`, or given such layers (`nn.Sequential(..., nn.Dropout(0.5))`, a
    network handed to a wrapper or another module's constructor: `Classifier(backbone)`,
    `nn.DataParallel(net)`, `torch.compile(net)`; a
    one-layer `nn.LSTM(..., dropout=0.2)` holds none: its dropout runs between layers). A model
    whose layers are unknown (from a package outside the project, or passed in with no caller
    in view; a helper's parameter counts as known when a caller in another file of the project
    passes it a model that holds such layers) is not reported: a pass is proven inference and the model proven to care about
    its mode, or the rule is silent.

    ## Why is this bad?
    In training mode dropout drops activations at random and batch norm normalises with the
    statistics of the current batch (and updates its running averages with evaluation data).
    Metrics come out noisy and wrong, predictions change from run to run, and the model's
    statistics are polluted by the evaluation set. Where the model is known to hold no such
    layer (built in the file from `torch.nn` layers and local classes, all visible, with no
    dropout, batch norm, `RReLU`, transformer layer or `self.training` read), train mode
    changes nothing and the rule is silent.

    ## Example
    ```python
    def evaluate(model, loader):
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
        return correct


    for epoch in range(epochs):
        model.train()
        train_one_epoch(model, train_loader, optimizer)
        print(evaluate(model, val_loader))
    ```

    ## Use instead
    ```python
    def evaluate(model, loader):
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## Fix safety
    The fix inserts `model.eval()` at the start of the evaluation function (after its
    docstring), or before the evaluation loop or inference statements. Where training can
    follow the evaluation (it runs inside an epoch loop, or before training in the same
    function) and nothing switches the model back, it also inserts `model.train()` right
    after the evaluation, so the next training pass does not run in eval mode. An evaluation
    function that no code in the file calls (or that is passed around by name) may be
    followed by training elsewhere: there the fix saves the mode
    (`was_training = model.training`), calls `model.eval()`, and restores the mode in a
    `finally:` block around the function's body. For a module the training loop does not
    train, it inserts `module.eval()` once, before the outermost loop around the pass. The fix is unsafe: it changes the numbers
    the evaluation computes (that is its point).

    ## References
    - [`torch.nn.Module.eval`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval)
    - [Autograd mechanics: evaluation mode](https://pytorch.org/docs/stable/notes/autograd.html#evaluation-mode-nn-module-eval)
    """

    code = "TL401"
    name = "inference-in-train-mode"
    required_words = (("torch", "torchvision", "pytorch_lightning", "lightning", "timm", STAR_IMPORT),)
    message = "`{model}` runs for evaluation without `{model}.eval()`: dropout and batch norm stay in training mode"
    untrained_message = (
        "`{model}` runs in training mode inside a loop that does not train it: its dropout and batch norm stay in training mode"
    )

    def leave_Module(self, original_node: cst.Module) -> None:
        evaluation = self.semantic.evaluation
        reported = []
        for scope in evaluation.scopes:
            if scope.grad_only:
                continue  # (a pass beside training found by its gradients alone)
            known = evaluation.known_mode_layers if scope.flow else evaluation.known_mode_dependent
            if not known(scope.model, scope.function):
                continue  # only models known to hold dropout or batch norm
            model = self.context.module.code_for_node(scope.model)
            if scope.kind == "untrained":  # nothing sets its mode (``EvaluationFacts._untrained``)
                self.report(scope.forwards[0], self.untrained_message.format(model=model), fix=self._untrained_fix(scope, model))
                continue
            if evaluation.in_eval_mode(scope) or any(evaluation.eval_carries_over(r, scope) for r in reported):
                continue
            reported.append(scope)
            self.report(scope.forwards[0], self.message.format(model=model), fix=self._fix(scope, model))

    def _untrained_fix(self, scope, model: str) -> Fix | None:
        """``model.eval()`` once, before the outermost loop around the pass: nothing in the
        file trains the module or sets its mode, so it stays in eval mode from there on."""
        loop = scope.node
        if self.semantic.evaluation.binds_in(loop, scope.model, scope.function):
            return None
        inserted = cst.parse_statement(f"{model}.eval()\n").with_changes(leading_lines=loop.leading_lines)
        changes = {loop: cst.FlattenSentinel([inserted, loop.with_changes(leading_lines=())])}
        return Fix(f"Call `{model}.eval()` before the training loop", changes, Applicability.UNSAFE)

    def _fix(self, scope, model: str) -> Fix | None:
        evaluation = self.semantic.evaluation
        start = evaluation.eval_insertion(scope)
        if start is None:
            return None
        if scope.kind == "function" and not evaluation.bound_inside(scope) and evaluation.callers_unknown(scope.node):
            return self._restoring_fix(scope.node, start, model)
        restores = evaluation.train_restores(scope)
        if restores is None:
            return None
        before = {start: [f"{model}.eval()"]}
        after: dict[cst.CSTNode, list[str]] = {}
        for statement, restored in restores:
            after.setdefault(statement, []).append(f"{restored}.train()")
        changes = {}
        for statement in {**before, **after}:
            inserted_before = [cst.parse_statement(code + "\n") for code in before.get(statement, ())]
            inserted_after = [cst.parse_statement(code + "\n") for code in after.get(statement, ())]
            if inserted_before:  # comments above the statement stay above what goes before it
                inserted_before[0] = inserted_before[0].with_changes(leading_lines=statement.leading_lines)
                statement_now = statement.with_changes(leading_lines=())
            else:
                statement_now = statement
            changes[statement] = cst.FlattenSentinel([*inserted_before, statement_now, *inserted_after])
        return Fix(f"Call `{model}.eval()` before evaluating", changes, Applicability.UNSAFE)

    def _restoring_fix(self, function: cst.FunctionDef, start: cst.BaseStatement, model: str) -> Fix | None:
        """Where the function's callers are unknown (none in the file, or it is passed around),
        what runs after it may be training: save the mode, evaluate, and restore it."""
        if _SAVED_MODE in self.context.module.code_for_node(function):
            return None
        statements = list(function.body.body)
        index = statements.index(start)
        body = [statements[index].with_changes(leading_lines=()), *statements[index + 1 :]]
        restored = cst.Try(
            body=cst.IndentedBlock(body=body),
            finalbody=cst.Finally(body=cst.IndentedBlock(body=[cst.parse_statement(f"{model}.train({_SAVED_MODE})\n")])),
        )
        saved = cst.parse_statement(f"{_SAVED_MODE} = {model}.training\n").with_changes(leading_lines=start.leading_lines)
        new_body = [*statements[:index], saved, cst.parse_statement(f"{model}.eval()\n"), restored]
        changes = {function: function.with_changes(body=function.body.with_changes(body=new_body))}
        return Fix(f"Call `{model}.eval()` before evaluating and restore the previous mode after", changes, Applicability.UNSAFE)


_SAVED_MODE = "was_training"
