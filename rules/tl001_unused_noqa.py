from torchlint.rule import Rule


class UnusedNoqa(Rule):
    """
    ## What it does
    Reports a `# noqa: CODES` comment whose torchlint codes suppress nothing on their line,
    name no rule, name a rule that is not selected, or are repeated (ruff's RUF100).

    ## Why is this bad?
    A `noqa` that suppresses nothing is noise, and it hides the next real finding on its
    line: the code it was written for is long fixed, or it was mistyped (`TL105` for
    `TL501`) and never worked. After `--add-noqa` has written a baseline, TL001 with `--fix`
    takes each directive away as the debt it marked is paid.

    ## Example
    ```python
    torch.save(model.state_dict(), "model.pt")  # noqa: TL501
    x = torch.zeros(3)  # noqa: TL999, E501
    ```

    ## Use instead
    ```python
    torch.save(model.state_dict(), "model.pt")
    x = torch.zeros(3)  # noqa: E501
    ```

    ## Fix safety
    The fix is safe: it removes the unused codes from the directive, or the directive where no
    code is left (the comment's line too, for a comment on a line of its own); other text of
    the comment and other tools' codes stay.

    ## Details
    Only torchlint's codes (`TL` and digits) are judged: `# noqa: E501` and a bare `# noqa`
    may serve the project's other linters and are left alone. A code counts as used when it
    (or a prefix it is, `TL5`) names a finding that the directive suppressed on its line in
    this run; a finding already suppressed by a file-level `# torchlint: noqa` uses no line
    directive. The codes of a rule that raised an internal error on the file are not judged.
    `# noqa: TL001` on a line keeps this rule quiet there. The engine computes it after every
    other rule of the pass, from the findings before suppression.
    """

    code = "TL001"
    name = "unused-noqa"
    message = "unused `noqa` directive"

    @staticmethod
    def known_codes() -> list[str]:
        """Every rule's code: a directive's code that is none of them names no rule. (Asked
        by the engine, which knows no rule but the ones it is given.)"""
        from torchlint.rules import all_rules

        return [r.code for r in all_rules()]
