"""The vocabulary of PyTorch the semantic facts share: which calls build modules, optimizers
and schedulers, which layers and functions depend on the mode, which contexts turn gradients
off, which names and libraries mean a device or a GPU. Plain names and patterns only: this
module imports no other of the package, and every fact above it may read it (the summaries of
the project index as much as a file's model), so the package's imports go one way.
"""

from __future__ import annotations

import enum
import re


# --- what calls build (the model's kinds)

class Kind(enum.Enum):
    MODULE = "nn.Module"
    OPTIMIZER = "optimizer"
    SCHEDULER = "LR scheduler"
    LOSS = "loss function"
    SCALER = "GradScaler"


# Methods of an nn.Module that return the module itself.
MODULE_RETURNS_SELF = frozenset(
    {"to", "cuda", "cpu", "train", "eval", "float", "double", "half", "bfloat16", "requires_grad_", "apply",
     "to_empty", "share_memory", "xpu", "mps", "type"}
)


# Attributes of a wrapper module that hold the wrapped module (DataParallel, DDP, torch.compile).
MODULE_WRAPPED_ATTRS = frozenset({"module", "_orig_mod"})


_NOT_MODULE_CLASSES = frozenset(
    {"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer", "torch.nn.UninitializedParameter",
     "torch.nn.UninitializedBuffer"}
)


# Packages under torch.nn whose classes are not modules (pruning methods, PackedSequence,
# SDPBackend, BlockMask, parameters).
_NOT_MODULE_PACKAGES = ("torch.nn.functional.", "torch.nn.init.", "torch.nn.utils.", "torch.nn.attention.", "torch.nn.parameter.")


def _module_class_kind(qname: str) -> Kind | None:
    """The kind of object that calling the class or factory ``qname`` builds."""
    if qname in _NOT_MODULE_CLASSES:
        return None
    head, _, last = qname.rpartition(".")
    if qname.startswith("torch.nn.") and not qname.startswith(_NOT_MODULE_PACKAGES) and last[:1].isupper():
        if last.endswith("Loss"):
            return Kind.LOSS
        return Kind.MODULE
    if qname.startswith("torch.optim.lr_scheduler.") and last[:1].isupper():
        return Kind.SCHEDULER
    if qname == "torch.optim.swa_utils.AveragedModel":
        return Kind.MODULE
    if qname == "torch.optim.swa_utils.SWALR":
        return Kind.SCHEDULER
    if qname.startswith("torch.optim.") and last[:1].isupper() and not qname.startswith("torch.optim.swa_utils."):
        return Kind.OPTIMIZER
    if qname in ("torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.cpu.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"):
        return Kind.SCALER
    if qname.startswith("torchvision.models.") and last[:1].islower() and not head.endswith(("_utils", "utils")):
        return Kind.MODULE
    if qname in ("timm.create_model", "torch.hub.load", "torch.jit.script", "torch.jit.trace"):
        return Kind.MODULE
    if qname.startswith("transformers.") and last == "from_pretrained" and ("Model" in head or "For" in head):
        return Kind.MODULE
    return None


# Base classes whose subclasses are of a kind.
_BASE_KINDS = {
    "torch.nn.Module": Kind.MODULE,
    "torch.nn.modules.module.Module": Kind.MODULE,
    "torch.nn.modules.loss._Loss": Kind.LOSS,
    "torch.nn.modules.loss._WeightedLoss": Kind.LOSS,
    "torch.optim.Optimizer": Kind.OPTIMIZER,
    "torch.optim.optimizer.Optimizer": Kind.OPTIMIZER,
    "torch.optim.lr_scheduler.LRScheduler": Kind.SCHEDULER,
    "torch.optim.lr_scheduler._LRScheduler": Kind.SCHEDULER,
    "pytorch_lightning.LightningModule": Kind.MODULE,
    "lightning.LightningModule": Kind.MODULE,
    "lightning.pytorch.LightningModule": Kind.MODULE,
}


# --- what depends on the mode, and who sets it (the mode facts)

# Lightning hooks: the framework sets the mode and disables gradients around them.
_FRAMEWORK_HOOKS = re.compile(r"^(validation|test|predict)_(step|step_end|epoch_end)$|^on_\w+$")


_FRAMEWORK_PACKAGES = ("pytorch_lightning.", "lightning.", "transformers.", "ignite.")


# The methods of a framework's classes that it calls once per training batch, with gradients
# on (Lightning's `training_step` and batch hooks, a Hugging Face `Trainer`'s steps): each call
# is an iteration of the framework's training loop.
TRAINING_STEP_HOOKS = frozenset(
    {"training_step", "training_step_end", "on_train_batch_start", "on_train_batch_end", "on_before_backward",
     "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad", "compute_loss"}
)


# Layers and functions whose forward pass depends on train/eval mode.
_MODE_LAYERS = re.compile(r"Dropout|BatchNorm|RReLU|^Transformer")


_MODE_FUNCTIONS = re.compile(r"dropout|batch_norm|rrelu")


# torchvision's model builders whose networks hold batch norm or dropout (its ViT, Swin and
# ConvNeXt hold only layer norm and zero dropout by default: not listed).
_TORCHVISION_MODE_MODELS = re.compile(
    r"(resnet|resnext|wide_resnet|vgg|alexnet|densenet|mobilenet|efficientnet|inception|googlenet|squeezenet|"
    r"shufflenet|mnasnet|regnet|fcn_|deeplabv3|lraspp|fasterrcnn|fcos|retinanet|maskrcnn|keypointrcnn|ssd|"
    r"r3d_|mc3_|r2plus1d_|s3d|raft|quantized)",
    re.IGNORECASE,
)


_BUILDING_BUILTINS = frozenset({"getattr", "eval", "exec", "__import__", "globals", "locals", "vars"})


_LOADING = frozenset({"torch.load", "torch.jit.load", "torch.hub.load", "torch.jit.script", "torch.jit.trace"})


# Methods on a constructor's arguments that build no layer (``cfg.get("dim")``).
_PLAIN_METHODS = frozenset(
    {"get", "pop", "items", "keys", "values", "setdefault", "format", "lower", "upper", "split", "join", "strip",
     "startswith", "endswith", "copy", "index", "count", "append", "extend", "insert", "register_buffer",
     "register_parameter", "add_module", "apply", "size", "dim"}
)


# --- what turns gradients off (the evaluation facts)

# The contexts that turn gradients off (or on, deliberately) around a block.
_GRAD_CONTEXTS = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled", "torch.enable_grad",
     "torch.autograd.no_grad", "torch.autograd.enable_grad", "torch.autograd.set_grad_enabled",
     "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
     "torch.autograd.grad_mode.set_grad_enabled", "torch.autograd.grad_mode.enable_grad"}
)


_GRAD_CONTEXT_TEXT = ("no_grad", "inference_mode", "set_grad_enabled", "enable_grad")


# --- devices and GPUs (the device facts)

# What a test mentions when it stops for a missing GPU (not `if args.device not in ...`).
_AVAILABILITY = re.compile(r"cuda|gpu|is_available|device_count", re.IGNORECASE)


# Names a script gives its device: `device`, `dev`, `DEVICE`, `train_device`.
DEVICE_NAME = re.compile(r"^(device|dev|DEVICE|DEV)$|_(device|DEVICE)$")


# Libraries that only run on an NVIDIA GPU: a file that imports one unconditionally is
# CUDA-only by design, and so is the rest of the block (an `if` branch, a `try` body) that
# imports one. Not here: DeepSpeed (it has CPU, XPU and NPU accelerators), bitsandbytes and
# xformers (both have CPU code paths; bitsandbytes' 4- and 8-bit model loading is another
# matter, see `_QUANTIZED_LOADING`), Accelerate and Lightning.
_GPU_ONLY_MODULES = (
    "apex", "triton", "cupy", "pycuda", "numba.cuda", "cuda", "cutlass", "torch.utils.cpp_extension", "flash_attn",
    "tensorrt", "torch2trt", "kvikio", "deepspeed.ops.op_builder.GDSBuilder",  # GPUDirect Storage
    "transformer_engine", "msamp",  # NVIDIA's and Microsoft's FP8 training libraries
    "tilelang",  # GPU kernels written in TileLang (CUDA and ROCm targets)
)


# torch.distributed collectives: with NCCL, the backend of GPU training, they need CUDA tensors.
_COLLECTIVES = frozenset(
    f"torch.distributed.{name}"
    for name in (
        "all_reduce", "all_gather", "all_gather_into_tensor", "all_to_all", "all_to_all_single", "broadcast", "reduce",
        "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter", "send", "recv", "isend", "irecv",
    )
)


_DEVICE_STRING = re.compile(r"^(cuda(:\d+)?|cpu|mps|xpu)$")


def _gpu_only_module(module: str) -> bool:
    """A GPU-only library, or a compiled CUDA kernel extension (``fused_layer_norm_cuda``)."""
    if any(module == g or module.startswith(g + ".") for g in _GPU_ONLY_MODULES):
        return True
    return any(part.endswith("_cuda") for part in module.split("."))


# --- modes and parameter-free layers (the forward passes)

EVAL, TRAIN = "eval", "train"


# `torch.nn` modules without parameters: functions of their inputs (`cos = nn.CosineSimilarity()`,
# `softmax = nn.Softmax(dim=1)`). Running one runs no model: a graph there is its input's.
_PARAMETER_FREE = frozenset(
    f"torch.nn.{name}"
    for name in (
        "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh", "Softmax",
        "LogSoftmax", "Softmin", "Softmax2d", "Softplus", "Softsign", "Softshrink", "Hardshrink", "Hardtanh",
        "Hardswish", "Hardsigmoid", "Tanhshrink", "Threshold", "GLU", "LogSigmoid", "CosineSimilarity",
        "PairwiseDistance", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "Identity", "Flatten",
        "Unflatten", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle",
        "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
        "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
        "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "ChannelShuffle",
    )
)

