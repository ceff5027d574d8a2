from torchlint.rule import Rule


class InvalidFile(Rule):
    """
    ## What it does
    Reports a file that cannot be read, decoded or parsed as Python: a syntax error, bytes
    that are not valid in the file's declared encoding, a path that does not exist or cannot
    be opened.

    ## Why is this bad?
    torchlint cannot check a file it cannot parse, and neither can Python run it. The other
    files of the run are still linted.

    ## Example
    ```python
    for batch in loader
        loss.backward()
    ```

    ## Use instead
    ```python
    for batch in loader:
        loss.backward()
    ```

    ## Fix safety
    There is no fix: the engine reports this code itself, at the parser's position.
    """

    code = "TL000"
    name = "invalid-file"
    message = "cannot read or parse the file"
