"""torchlint's rules: one module per rule, each a ``torchlint.rule.Rule`` subclass whose
docstring is its documentation."""
