from __future__ import annotations

import libcst as cst

from torchlint.torch_rule import TorchRule
from torchlint.semantic.references import calls_one_of, has_star, is_literal, keyword, positional

DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
IN_MEMORY = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
_NUM_WORKERS_INDEX = 5  # DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, ...)
_STATEMENT = (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.SimpleStatementLine, cst.Lambda, cst.CompFor)


class SynchronousDataLoader(TorchRule):
    """
    ## What it does
    Finds a `torch.utils.data.DataLoader` built without `num_workers` (or with
    `num_workers=0`) that feeds a training loop: the loader, or the name or `self.`
    attribute it is assigned to, or a parameter of a function of the same file it is passed
    to, is what a `for` loop iterates (directly or through `enumerate`, `tqdm`, `zip`), and
    that loop runs `backward()` (itself or through a training-step function of the file).
    Loaders of evaluation loops, loaders whose use the file does not show, loaders of a
    `TensorDataset`, a `range` of indices or a literal list (already in memory, where
    workers only add start-up cost),
    `num_workers` passed as a variable (the user's choice) or through `**kwargs`, and tests
    are left alone. Replaces TorchFix's TOR401, which reports every such `DataLoader`.

    Opt-in: whether loading is slow enough to matter is not visible in the code. On the
    ecosystem corpus most training loaders without workers read pre-tokenized text or index
    tensors already in memory, where workers gain little (9 of a sample of 30 findings were
    worth changing); select it for image or audio pipelines that decode per item.

    ## Why is this bad?
    With no workers, the training process itself loads, decodes and augments every batch
    while the GPU waits: data loading and the training step run one after the other instead
    of overlapping, which often makes the GPU idle most of the time.

    ## Example
    ```python
    loader = DataLoader(ImageFolder(root, transform), batch_size=64, shuffle=True)
    for images, labels in loader:
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    loader = DataLoader(ImageFolder(root, transform), batch_size=64, shuffle=True,
                        num_workers=4, pin_memory=True, persistent_workers=True)
    ```

    ## Fix safety
    There is no fix: the right number of workers depends on the machine (its cores, its
    memory, the platform's start method), and worker processes need a dataset that can be
    pickled and code guarded by `if __name__ == "__main__":` where processes are spawned.

    ## References
    - [`torch.utils.data` (single- and multi-process data loading)](https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading)
    - [Performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    code = "TL702"
    name = "synchronous-dataloader"
    opt_in = True
    required_words = (("DataLoader",), ("backward",))
    message = "`DataLoader` without `num_workers` feeds a training loop: batches load in the training process, one at a time"

    def visit_Call(self, node: cst.Call) -> None:
        if has_star(node, "**") or calls_one_of(self.semantic, node, DATALOADER) is None:
            return
        given = positional(node)
        if any(a.star for a in given):
            return
        workers = keyword(node, "num_workers") or (given[_NUM_WORKERS_INDEX] if len(given) > _NUM_WORKERS_INDEX else None)
        if workers is not None and not is_literal(workers.value, "0"):
            return
        dataset = keyword(node, "dataset") or (given[0] if given else None)
        if dataset is None or self._in_memory(dataset.value):
            return
        training = self.semantic.training
        if training.in_test(node):
            return
        if any(self._feeds_training(loop) for loop in self._loops_over(node)):
            self.report(node)

    def _in_memory(self, dataset: cst.BaseExpression) -> bool:
        values = [dataset]
        if isinstance(dataset, (cst.Name, cst.Attribute)):
            values += self.semantic.values(dataset)
        return any(
            calls_one_of(self.semantic, v, IN_MEMORY | {"builtins.range"}) is not None or isinstance(v, (cst.List, cst.Tuple))
            for v in values
        )

    def _loops_over(self, loader: cst.Call) -> list[cst.For]:
        """The ``for`` loops that iterate the loader, through the name or ``self.`` attribute
        it is assigned to, or a same-file function's parameter it is passed to."""
        reads: list[cst.CSTNode] = []
        parent = self.semantic.parent(loader)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Attribute):
            reads = self._attribute_reads(parent.targets[0].target)
        else:
            reads = list(self.semantic.reads_of(loader))
        loops = []
        for read in reads:
            loop = self._iterating_loop(read)
            if loop is not None:
                loops.append(loop)
                continue
            for param in self._parameters_given(read):
                for inner in self.semantic.binding_reads(param) or ():
                    loop = self._iterating_loop(inner)
                    if loop is not None:
                        loops.append(loop)
        return loops

    def _attribute_reads(self, target: cst.Attribute) -> list[cst.CSTNode]:
        """Reads of ``self.<attr>`` in the class of the assignment."""
        info = self.semantic.enclosing_class(target)
        if info is None or not (isinstance(target.value, cst.Name) and target.value.value == "self"):
            return []
        attr = target.attr.value
        found = []
        for node, entering in self.semantic.scanned:
            if entering and type(node) is cst.Attribute and node.attr.value == attr and node is not target:
                if isinstance(node.value, cst.Name) and node.value.value == "self" and self.semantic.inside(node, info.node):
                    found.append(node)
        return found

    def _iterating_loop(self, read: cst.CSTNode) -> cst.For | None:
        """The ``for`` loop whose iterable holds ``read`` (``loader``, ``enumerate(loader)``)."""
        child = read
        for ancestor in self.semantic.ancestors(read):
            if isinstance(ancestor, cst.For):
                return ancestor if child is ancestor.iter else None
            if isinstance(ancestor, _STATEMENT):
                return None
            child = ancestor
        return None

    def _parameters_given(self, read: cst.CSTNode) -> list[cst.Param]:
        """The parameters of a same-file function that ``read``, an argument of a call of it,
        binds."""
        arg = self.semantic.parent(read)
        call = self.semantic.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call) or arg.star:
            return []
        function = self.semantic.training.local_callee(call.func)
        if function is None:
            return []
        params = [*function.params.posonly_params, *function.params.params]
        if isinstance(call.func, cst.Attribute) and params and params[0].name.value == "self":
            params = params[1:]
        if arg.keyword is not None:
            named = [*params, *function.params.kwonly_params]
            return [p for p in named if p.name.value == arg.keyword.value]
        index = [a for a in call.args if a.keyword is None].index(arg)
        return [params[index]] if index < len(params) else []

    def _feeds_training(self, loop: cst.For) -> bool:
        training = self.semantic.training
        for iteration in training.iterations:
            if any(self.semantic.inside(call, loop) for call in iteration.backward_calls):
                return True
        # A function or method of the file that runs a backward pass, called in the loop
        # (`self.train_step(batch)`).
        backward_functions = {training.sites[call].function for call in training.backward_calls} - {None}
        return any(training.local_callee(call.func) in backward_functions for call in self.semantic.calls_in(loop.body))
