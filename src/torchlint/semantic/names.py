"""What names say: the words of evaluation functions, evaluation data and models. The facts
decide from structure; these words only break ties (``evaluation.py``)."""

from __future__ import annotations

import re

import libcst as cst



_EVAL_FUNCTION_WORDS = frozenset(
    {"evaluate", "evaluation", "eval", "evaluating", "validate", "validation", "validating", "valid", "val",
     "test", "testing", "predict", "prediction", "predictions", "infer", "inference", "accuracy",
     "visualize", "visualise", "estimate"}
)
_GENERATION_WORDS = frozenset({"generate", "generation", "sample", "sampling", "decode", "decoding"})
_EVAL_DATA_WORDS = frozenset({"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev", "holdout"})
_DATA_WORDS = frozenset(
    {"loader", "loaders", "dataloader", "dataloaders", "dl", "dls", "iter", "iterator", "batches", "batch", "set",
     "dataset", "datasets", "ds", "data", "gen", "generator", "samples", "examples", "images", "imgs", "img",
     "image", "x", "y", "inputs", "input", "features", "feats", "seqs", "sentences", "texts", "tensor", "split"}
)
_LENGTH_WORDS = frozenset({"len", "lens", "length", "lengths"})
_JOINED_EVAL_DATA = re.compile(r"^(val|valid|test|eval|dev)(loader|set|data|dl|ds|iter|batch|x|images|imgs)s?$")
_MODEL_WORDS = frozenset(
    {"model", "net", "network", "classifier", "encoder", "decoder", "backbone", "generator", "discriminator", "cnn",
     "rnn", "lstm", "gru", "mlp", "autoencoder", "vae", "unet", "transformer", "student", "teacher"}
)
# First words of function names that act on a model rather than name one.
_VERBS = frozenset(
    {"load", "save", "get", "set", "build", "make", "create", "init", "initialize", "unwrap", "wrap", "prepare",
     "setup", "compute", "run", "to", "from", "convert", "export", "apply", "register", "update", "freeze", "print",
     "show", "log", "copy", "clone", "merge", "replace", "reset", "count", "reload", "generate", "predict", "evaluate",
     "sample", "decode", "encode", "forward", "train"}
)
# Last words of names that hold something about a model, not a model: `model_fn`, `model_cfg`.
_NOT_MODEL_ENDINGS = frozenset({"fn", "func", "function", "callable", "cfg", "config", "path", "dir", "file", "name", "type", "kwargs", "args"})


def words(name: str) -> list[str]:
    """``evaluateModel`` -> ``["evaluate", "model"]``; ``X_test`` -> ``["x", "test"]``."""
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]


def is_model_name(name: str) -> bool:
    return any(w in _MODEL_WORDS or w.endswith(("net", "model")) for w in words(name))


def _is_model_noun(name: str) -> bool:
    """A model name that is not a verb phrase: ``best_model``, not ``unwrap_model`` or
    ``load_darknet_weights``."""
    found = words(name)
    return is_model_name(name) and found[0] not in _VERBS and found[-1] not in _NOT_MODEL_ENDINGS


def _maybe_eval_data(name: str) -> bool:
    """A quick look before splitting the name into words: most names are not data."""
    lower = name.lower()
    return any(part in lower for part in ("val", "test", "dev", "eval", "holdout"))


def _is_eval_data_name(name: str) -> bool:
    found = set(words(name))
    if found & _LENGTH_WORDS:
        return False  # `valid_lens_x`: the lengths of the valid tokens of a batch, not validation data
    return bool(found & _EVAL_DATA_WORDS and found & _DATA_WORDS) or bool(_JOINED_EVAL_DATA.match(name.lower()))


class _EvalDataNames(cst.CSTVisitor):
    """Whether an expression names validation or test data (``is_eval_data``)."""

    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Name(self, node: cst.Name) -> None:
        self.found = self.found or _is_eval_data_name(node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = node.evaluated_value
        self.found = self.found or (isinstance(value, str) and value.lower() in _EVAL_DATA_WORDS)

    def visit_List(self, node: cst.List) -> bool:
        return False  # for split in ["train", "val"]: names, not data

    visit_Tuple = visit_Set = visit_List
