"""The runtime verifier (`torchlint verify`) and the reference trainer.

The parent side (`cli`, `launcher`, `checks`, `report`) does not import torch; the child process
(`_child`, `instrument`, `reference`) does. `torchlint.runtime.reference` holds the reference
trainer: `run_reference("module:factory", cuda=False, user=...)`, and its single checks
`overfit`, `eval_determinism` and `state_dict_round_trip` for use on their own.
"""
