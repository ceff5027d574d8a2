from torchlint.semantic import torch_api
from torchlint.torch_rule import ApiSymbolRule



class NonPublicApi(ApiSymbolRule):
    """
    ## What it does
    Finds uses and imports of private paths to public torch functions:
    `torch.utils.data._utils.collate.default_collate` and `default_convert`, however reached
    (`from torch.utils.data._utils.collate import default_collate`,
    `import torch.utils.data._utils.collate as c; c.default_collate(batch)`).
    Replaces TorchFix's TOR104 and TOR105.

    ## Why is this bad?
    A module whose name starts with an underscore is torch's own business: it may move or
    change in any release without a deprecation. The same functions are public as
    `torch.utils.data.default_collate` and `torch.utils.data.default_convert` (since torch
    1.11).

    ## Example
    ```python
    from torch.utils.data._utils.collate import default_collate

    loader = DataLoader(dataset, collate_fn=default_collate)
    ```

    ## Use instead
    ```python
    from torch.utils.data import default_collate

    loader = DataLoader(dataset, collate_fn=default_collate)
    ```

    ## Fix safety
    The public name is the same function, so the fix renames: the `from` import's module
    when every name it imports has a public twin there, or a use that spells the private
    path from `torch` (`torch.utils.data._utils.collate.default_collate`). A use through
    another name (`c.default_collate` after `import ... as c`) is reported only: its
    import would be left unused. The fix is safe when the oldest torch the project supports
    (`target-torch`, or the requirement on torch it declares) is 1.11 or later, where the
    public names appeared; unknown, it is unsafe.
    The fix writes no name the use does not already read: the new path starts from the name
    the old one spells (`torch`, or the file's alias), so it runs wherever the old code ran,
    in a notebook's cell order too.

    ## References
    - [torch.utils.data](https://pytorch.org/docs/stable/data.html#torch.utils.data.default_collate)
    """

    code = "TL805"
    name = "non-public-api"
    category = torch_api.NON_PUBLIC
    opt_in = True  # too few findings on real code to measure its precision (ecosystem/triage)
    message = "`{name}` is a non-public path; use `{replacement}` (public since torch {since})"

    def message_for(self, symbol: torch_api.ApiSymbol) -> str:
        return self.message.format(name=symbol.name, replacement=symbol.replacement, since=symbol.since)
