import libcst as cst

from torchlint.torch_rule import TorchRule

RNG_FACTORIES = frozenset(
    {"numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator", "random.Random"}
)


class WorkerSharedRng(TorchRule):
    """
    ## What it does
    Finds a `DataLoader` with `num_workers > 0` and no `worker_init_fn` over a `Dataset`
    that creates its own RNG object in `__init__` (`np.random.default_rng(...)`,
    `np.random.RandomState(...)`, `random.Random(...)`) and draws from it in `__getitem__`.

    ## Why is this bad?
    Each worker process gets a copy of the dataset, RNG state included, so every worker
    draws the same "random" numbers: augmentations repeat across workers and the effective
    randomness shrinks by the number of workers. PyTorch reseeds `torch` and Python's global
    `random` per worker, but not an RNG object the dataset holds.

    ## Example
    ```python
    class Noisy(Dataset):
        def __init__(self):
            self.rng = np.random.default_rng(0)

        def __getitem__(self, i):
            return self.rng.normal()

    loader = DataLoader(Noisy(), num_workers=4)
    ```

    ## Use instead
    ```python
    def seed_worker(worker_id):
        info = torch.utils.data.get_worker_info()
        info.dataset.rng = np.random.default_rng(info.seed % 2**32)

    loader = DataLoader(Noisy(), num_workers=4, worker_init_fn=seed_worker)
    ```

    ## Fix safety
    There is no fix: how each worker should be seeded is the author's choice.

    ## References
    - [Randomness in multi-process data loading](https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading)
    """

    code = "TL701"
    name = "worker-shared-rng"
    required_words = (("DataLoader",), ("num_workers",))
    message = "`{dataset}` draws from its own RNG `self.{attr}` in `__getitem__`: with {workers} workers and no `worker_init_fn`, every worker draws the same numbers"

    def visit_Call(self, node: cst.Call) -> None:
        if not self.semantic.is_call_to(node, "torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"):
            return
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        if "worker_init_fn" in keywords or any(a.star == "**" for a in node.args):
            return
        workers = keywords.get("num_workers")
        if not (isinstance(workers, cst.Integer) and int(workers.value) > 0):
            return
        dataset = keywords.get("dataset") or (node.args[0].value if node.args and node.args[0].keyword is None else None)
        info = self._dataset_class(dataset)
        if info is None:
            return
        attr = self._shared_rng(info)
        if attr is not None:
            self.report(node, self.message.format(dataset=info.node.name.value, attr=attr, workers=workers.value))

    def _dataset_class(self, expr):
        if isinstance(expr, cst.Name):
            values = self.semantic.values(expr)
            expr = values[0] if len(values) == 1 else None
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
            for assignment in self.semantic.assignments(expr.func):
                if assignment.node in self.semantic.classes:
                    return self.semantic.classes[assignment.node]
        return None

    def _shared_rng(self, info) -> str | None:
        getitem = next(
            (s for s in info.node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__getitem__"), None
        )
        if getitem is None:
            return None
        body = self.context.module.code_for_node(getitem)
        for attr, values in sorted(info.attribute_values.items()):
            if any(self._made_in_init(v) for v in values):
                if f"self.{attr}." in body:
                    return attr
        return None

    def _made_in_init(self, value: cst.BaseExpression) -> bool:
        """An RNG object made in ``__init__``, before the workers copy the dataset (one made
        lazily in ``__getitem__`` is made in each worker)."""
        if not (isinstance(value, cst.Call) and self.semantic.qualified_name(value.func) in RNG_FACTORIES):
            return False
        function = self.semantic.enclosing_function(value)
        return function is not None and function.name.value == "__init__"
