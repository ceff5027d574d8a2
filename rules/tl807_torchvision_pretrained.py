import ast

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen
from torchlint.semantic import torch_api
from torchlint.torch_rule import TorchRule
from torchlint.semantic.references import callee_names, is_literal, keyword, positional

# What `pretrained=True` and `pretrained_backbone=True` load, for every torchvision model
# builder that still takes them (`handle_legacy_interface` in torchvision 0.29's sources):
# (subpackage of torchvision.models, builder) -> (weights, backbone weights). "None": the
# builder has no weights (`pretrained=True` raises); "?": the weights depend on other
# arguments (`quantize=`, `backbone_name=`); None: no such parameter.
LEGACY_WEIGHTS: dict[tuple[str, str], tuple[str | None, str | None]] = {
    # torchvision.models
    ("", "alexnet"): ("AlexNet_Weights.IMAGENET1K_V1", None),
    ("", "convnext_base"): ("ConvNeXt_Base_Weights.IMAGENET1K_V1", None),
    ("", "convnext_large"): ("ConvNeXt_Large_Weights.IMAGENET1K_V1", None),
    ("", "convnext_small"): ("ConvNeXt_Small_Weights.IMAGENET1K_V1", None),
    ("", "convnext_tiny"): ("ConvNeXt_Tiny_Weights.IMAGENET1K_V1", None),
    ("", "densenet121"): ("DenseNet121_Weights.IMAGENET1K_V1", None),
    ("", "densenet161"): ("DenseNet161_Weights.IMAGENET1K_V1", None),
    ("", "densenet169"): ("DenseNet169_Weights.IMAGENET1K_V1", None),
    ("", "densenet201"): ("DenseNet201_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_b0"): ("EfficientNet_B0_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_b1"): ("EfficientNet_B1_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_b2"): ("EfficientNet_B2_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_b3"): ("EfficientNet_B3_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_b4"): ("EfficientNet_B4_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_b5"): ("EfficientNet_B5_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_b6"): ("EfficientNet_B6_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_b7"): ("EfficientNet_B7_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_v2_l"): ("EfficientNet_V2_L_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_v2_m"): ("EfficientNet_V2_M_Weights.IMAGENET1K_V1", None),
    ("", "efficientnet_v2_s"): ("EfficientNet_V2_S_Weights.IMAGENET1K_V1", None),
    ("", "googlenet"): ("GoogLeNet_Weights.IMAGENET1K_V1", None),
    ("", "inception_v3"): ("Inception_V3_Weights.IMAGENET1K_V1", None),
    ("", "maxvit_t"): ("MaxVit_T_Weights.IMAGENET1K_V1", None),
    ("", "mnasnet0_5"): ("MNASNet0_5_Weights.IMAGENET1K_V1", None),
    ("", "mnasnet0_75"): ("MNASNet0_75_Weights.IMAGENET1K_V1", None),
    ("", "mnasnet1_0"): ("MNASNet1_0_Weights.IMAGENET1K_V1", None),
    ("", "mnasnet1_3"): ("MNASNet1_3_Weights.IMAGENET1K_V1", None),
    ("", "mobilenet_v2"): ("MobileNet_V2_Weights.IMAGENET1K_V1", None),
    ("", "mobilenet_v3_large"): ("MobileNet_V3_Large_Weights.IMAGENET1K_V1", None),
    ("", "mobilenet_v3_small"): ("MobileNet_V3_Small_Weights.IMAGENET1K_V1", None),
    ("", "regnet_x_16gf"): ("RegNet_X_16GF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_x_1_6gf"): ("RegNet_X_1_6GF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_x_32gf"): ("RegNet_X_32GF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_x_3_2gf"): ("RegNet_X_3_2GF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_x_400mf"): ("RegNet_X_400MF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_x_800mf"): ("RegNet_X_800MF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_x_8gf"): ("RegNet_X_8GF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_y_128gf"): ("None", None),
    ("", "regnet_y_16gf"): ("RegNet_Y_16GF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_y_1_6gf"): ("RegNet_Y_1_6GF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_y_32gf"): ("RegNet_Y_32GF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_y_3_2gf"): ("RegNet_Y_3_2GF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_y_400mf"): ("RegNet_Y_400MF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_y_800mf"): ("RegNet_Y_800MF_Weights.IMAGENET1K_V1", None),
    ("", "regnet_y_8gf"): ("RegNet_Y_8GF_Weights.IMAGENET1K_V1", None),
    ("", "resnet101"): ("ResNet101_Weights.IMAGENET1K_V1", None),
    ("", "resnet152"): ("ResNet152_Weights.IMAGENET1K_V1", None),
    ("", "resnet18"): ("ResNet18_Weights.IMAGENET1K_V1", None),
    ("", "resnet34"): ("ResNet34_Weights.IMAGENET1K_V1", None),
    ("", "resnet50"): ("ResNet50_Weights.IMAGENET1K_V1", None),
    ("", "resnext101_32x8d"): ("ResNeXt101_32X8D_Weights.IMAGENET1K_V1", None),
    ("", "resnext101_64x4d"): ("ResNeXt101_64X4D_Weights.IMAGENET1K_V1", None),
    ("", "resnext50_32x4d"): ("ResNeXt50_32X4D_Weights.IMAGENET1K_V1", None),
    ("", "shufflenet_v2_x0_5"): ("ShuffleNet_V2_X0_5_Weights.IMAGENET1K_V1", None),
    ("", "shufflenet_v2_x1_0"): ("ShuffleNet_V2_X1_0_Weights.IMAGENET1K_V1", None),
    ("", "shufflenet_v2_x1_5"): ("ShuffleNet_V2_X1_5_Weights.IMAGENET1K_V1", None),
    ("", "shufflenet_v2_x2_0"): ("ShuffleNet_V2_X2_0_Weights.IMAGENET1K_V1", None),
    ("", "squeezenet1_0"): ("SqueezeNet1_0_Weights.IMAGENET1K_V1", None),
    ("", "squeezenet1_1"): ("SqueezeNet1_1_Weights.IMAGENET1K_V1", None),
    ("", "swin_b"): ("Swin_B_Weights.IMAGENET1K_V1", None),
    ("", "swin_s"): ("Swin_S_Weights.IMAGENET1K_V1", None),
    ("", "swin_t"): ("Swin_T_Weights.IMAGENET1K_V1", None),
    ("", "swin_v2_b"): ("Swin_V2_B_Weights.IMAGENET1K_V1", None),
    ("", "swin_v2_s"): ("Swin_V2_S_Weights.IMAGENET1K_V1", None),
    ("", "swin_v2_t"): ("Swin_V2_T_Weights.IMAGENET1K_V1", None),
    ("", "vgg11"): ("VGG11_Weights.IMAGENET1K_V1", None),
    ("", "vgg11_bn"): ("VGG11_BN_Weights.IMAGENET1K_V1", None),
    ("", "vgg13"): ("VGG13_Weights.IMAGENET1K_V1", None),
    ("", "vgg13_bn"): ("VGG13_BN_Weights.IMAGENET1K_V1", None),
    ("", "vgg16"): ("VGG16_Weights.IMAGENET1K_V1", None),
    ("", "vgg16_bn"): ("VGG16_BN_Weights.IMAGENET1K_V1", None),
    ("", "vgg19"): ("VGG19_Weights.IMAGENET1K_V1", None),
    ("", "vgg19_bn"): ("VGG19_BN_Weights.IMAGENET1K_V1", None),
    ("", "vit_b_16"): ("ViT_B_16_Weights.IMAGENET1K_V1", None),
    ("", "vit_b_32"): ("ViT_B_32_Weights.IMAGENET1K_V1", None),
    ("", "vit_h_14"): ("None", None),
    ("", "vit_l_16"): ("ViT_L_16_Weights.IMAGENET1K_V1", None),
    ("", "vit_l_32"): ("ViT_L_32_Weights.IMAGENET1K_V1", None),
    ("", "wide_resnet101_2"): ("Wide_ResNet101_2_Weights.IMAGENET1K_V1", None),
    ("", "wide_resnet50_2"): ("Wide_ResNet50_2_Weights.IMAGENET1K_V1", None),
    # torchvision.models.detection
    ("detection", "fasterrcnn_mobilenet_v3_large_320_fpn"): ("FasterRCNN_MobileNet_V3_Large_320_FPN_Weights.COCO_V1", "MobileNet_V3_Large_Weights.IMAGENET1K_V1"),
    ("detection", "fasterrcnn_mobilenet_v3_large_fpn"): ("FasterRCNN_MobileNet_V3_Large_FPN_Weights.COCO_V1", "MobileNet_V3_Large_Weights.IMAGENET1K_V1"),
    ("detection", "fasterrcnn_resnet50_fpn"): ("FasterRCNN_ResNet50_FPN_Weights.COCO_V1", "ResNet50_Weights.IMAGENET1K_V1"),
    ("detection", "fasterrcnn_resnet50_fpn_v2"): ("FasterRCNN_ResNet50_FPN_V2_Weights.COCO_V1", "ResNet50_Weights.IMAGENET1K_V1"),
    ("detection", "fcos_resnet50_fpn"): ("FCOS_ResNet50_FPN_Weights.COCO_V1", "ResNet50_Weights.IMAGENET1K_V1"),
    ("detection", "keypointrcnn_resnet50_fpn"): ("?", "ResNet50_Weights.IMAGENET1K_V1"),
    ("detection", "maskrcnn_resnet50_fpn"): ("MaskRCNN_ResNet50_FPN_Weights.COCO_V1", "ResNet50_Weights.IMAGENET1K_V1"),
    ("detection", "maskrcnn_resnet50_fpn_v2"): ("MaskRCNN_ResNet50_FPN_V2_Weights.COCO_V1", "ResNet50_Weights.IMAGENET1K_V1"),
    ("detection", "mobilenet_backbone"): ("?", None),
    ("detection", "resnet_fpn_backbone"): ("?", None),
    ("detection", "retinanet_resnet50_fpn"): ("RetinaNet_ResNet50_FPN_Weights.COCO_V1", "ResNet50_Weights.IMAGENET1K_V1"),
    ("detection", "retinanet_resnet50_fpn_v2"): ("RetinaNet_ResNet50_FPN_V2_Weights.COCO_V1", "ResNet50_Weights.IMAGENET1K_V1"),
    ("detection", "ssd300_vgg16"): ("SSD300_VGG16_Weights.COCO_V1", "VGG16_Weights.IMAGENET1K_FEATURES"),
    ("detection", "ssdlite320_mobilenet_v3_large"): ("SSDLite320_MobileNet_V3_Large_Weights.COCO_V1", "MobileNet_V3_Large_Weights.IMAGENET1K_V1"),
    # torchvision.models.optical_flow
    ("optical_flow", "raft_large"): ("Raft_Large_Weights.C_T_SKHT_V2", None),
    ("optical_flow", "raft_small"): ("Raft_Small_Weights.C_T_V2", None),
    # torchvision.models.quantization
    ("quantization", "googlenet"): ("?", None),
    ("quantization", "inception_v3"): ("?", None),
    ("quantization", "mobilenet_v2"): ("?", None),
    ("quantization", "mobilenet_v3_large"): ("?", None),
    ("quantization", "resnet18"): ("?", None),
    ("quantization", "resnet50"): ("?", None),
    ("quantization", "resnext101_32x8d"): ("?", None),
    ("quantization", "resnext101_64x4d"): ("?", None),
    ("quantization", "shufflenet_v2_x0_5"): ("?", None),
    ("quantization", "shufflenet_v2_x1_0"): ("?", None),
    ("quantization", "shufflenet_v2_x1_5"): ("?", None),
    ("quantization", "shufflenet_v2_x2_0"): ("?", None),
    # torchvision.models.segmentation
    ("segmentation", "deeplabv3_mobilenet_v3_large"): ("DeepLabV3_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1", "MobileNet_V3_Large_Weights.IMAGENET1K_V1"),
    ("segmentation", "deeplabv3_resnet101"): ("DeepLabV3_ResNet101_Weights.COCO_WITH_VOC_LABELS_V1", "ResNet101_Weights.IMAGENET1K_V1"),
    ("segmentation", "deeplabv3_resnet50"): ("DeepLabV3_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1", "ResNet50_Weights.IMAGENET1K_V1"),
    ("segmentation", "fcn_resnet101"): ("FCN_ResNet101_Weights.COCO_WITH_VOC_LABELS_V1", "ResNet101_Weights.IMAGENET1K_V1"),
    ("segmentation", "fcn_resnet50"): ("FCN_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1", "ResNet50_Weights.IMAGENET1K_V1"),
    ("segmentation", "lraspp_mobilenet_v3_large"): ("LRASPP_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1", "MobileNet_V3_Large_Weights.IMAGENET1K_V1"),
    # torchvision.models.video
    ("video", "mc3_18"): ("MC3_18_Weights.KINETICS400_V1", None),
    ("video", "mvit_v1_b"): ("MViT_V1_B_Weights.KINETICS400_V1", None),
    ("video", "mvit_v2_s"): ("MViT_V2_S_Weights.KINETICS400_V1", None),
    ("video", "r2plus1d_18"): ("R2Plus1D_18_Weights.KINETICS400_V1", None),
    ("video", "r3d_18"): ("R3D_18_Weights.KINETICS400_V1", None),
    ("video", "s3d"): ("S3D_Weights.KINETICS400_V1", None),
    ("video", "swin3d_b"): ("Swin3D_B_Weights.KINETICS400_V1", None),
    ("video", "swin3d_s"): ("Swin3D_S_Weights.KINETICS400_V1", None),
    ("video", "swin3d_t"): ("Swin3D_T_Weights.KINETICS400_V1", None),
}
SUBPACKAGES = frozenset(sub for sub, _ in LEGACY_WEIGHTS if sub)
NEW_NAME = {"pretrained": "weights", "pretrained_backbone": "weights_backbone"}
_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


# The torch release that came with torchvision 0.13, where `weights=` arrived.
WEIGHTS_TORCH = "1.12"


class TorchvisionPretrained(TorchRule):
    """
    ## What it does
    Finds torchvision model builders given `pretrained=` or `pretrained_backbone=`
    (`torchvision.models.resnet50(pretrained=True)`, `models.detection.fasterrcnn_resnet50_fpn(
    pretrained_backbone=False)`, `resnet18(True)`), however the builder is imported or
    referenced, and `torch.hub.load("pytorch/vision", "resnet18", pretrained=True)` (not
    from a release tag older than 0.13, where `pretrained` is the API; from another tag than
    a release or `main`, without a fix). Other
    libraries' `pretrained=` (timm's `create_model`, a project's own `load_model`) are left
    alone. Replaces TorchFix's TOR201.

    ## Why is this bad?
    `pretrained` and `pretrained_backbone` are deprecated since torchvision 0.13 and warn at
    every call; `weights=` names which weights are loaded (several builders have more than
    one set: `ResNet50_Weights.IMAGENET1K_V2` is more accurate than the V1 weights that
    `pretrained=True` loads).

    ## Example
    ```python
    model = torchvision.models.resnet50(pretrained=True)
    ```

    ## Use instead
    ```python
    model = torchvision.models.resnet50(weights="IMAGENET1K_V1")
    # or weights=ResNet50_Weights.DEFAULT for the best weights available
    ```

    ## Fix safety
    The fix writes exactly the weights the deprecated argument loads, so the model is the
    same: `pretrained=True` becomes `weights="IMAGENET1K_V1"` (the builder's legacy weights,
    as torchvision itself maps them, not `DEFAULT`, which for some builders is a newer
    set), `pretrained=False` becomes `weights=None`, and `pretrained=flag` becomes
    `weights="IMAGENET1K_V1" if flag else None`; likewise `pretrained_backbone` becomes
    `weights_backbone`. The weights are written as the string torchvision accepts in their
    place, so no import is needed. It is unsafe because `weights=` needs torchvision 0.13 or
    later, which the fix cannot know the project requires. A project that pins or caps torch
    below 1.12 (torchvision 0.13's torch: `torch<1.12`, conda's `pytorch=1.9.0` in an
    environment file) is not reported: there `pretrained` is the API. A builder whose legacy weights
    depend on other arguments (the quantized models' `quantize=`,
    `resnet_fpn_backbone(backbone_name)`), one without weights, and a `pretrained` argument
    beside other positional arguments or an existing `weights=` get no fix.

    ## References
    - [torchvision: models and pre-trained weights](https://pytorch.org/vision/stable/models.html)
    """

    code = "TL807"
    name = "torchvision-pretrained"
    required_words = (("pretrained", "pretrained_backbone"),)
    message = "`{old}=` is deprecated since torchvision 0.13; pass `{new}=`{weights}"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A call given ``pretrained=`` or ``pretrained_backbone=``, or a literal bool first."""
        return super().candidate(module) and any(
            any(k.arg in NEW_NAME for k in n.keywords)
            or (n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, bool))
            for n in module.nodes(ast.Call)
        )

    def visit_Call(self, node: cst.Call) -> None:
        given = positional(node)
        legacy = [a for a in node.args if a.keyword is not None and a.keyword.value in NEW_NAME]
        first_positional = bool(given) and not given[0].star and is_literal(given[0].value, "True", "False")
        if not legacy and not first_positional:
            return
        builder = self._builder(node)
        if builder not in LEGACY_WEIGHTS:
            return
        if not torch_api.concerns(WEIGHTS_TORCH, self.semantic.newest_torch):
            return  # the project pins or caps torch below torchvision 0.13's: `pretrained` is its API
        if first_positional:
            legacy = [given[0], *legacy]
        elif not legacy:
            return
        weights = LEGACY_WEIGHTS[builder]
        changes: dict[cst.CSTNode, cst.CSTNode] = {}
        for arg in legacy:
            old = arg.keyword.value if arg.keyword is not None else "pretrained"
            new = self._new_argument(arg, NEW_NAME[old], weights[0] if old == "pretrained" else weights[1])
            if new is None or keyword(node, NEW_NAME[old]) is not None or (arg.keyword is None and len(given) > 1):
                changes = {}
                break
            changes[arg] = new
        fix = None
        if changes and not self._hub_tag_unknown:
            fix = Fix("Pass `weights=` with the same weights (torchvision 0.13 or later)", changes, Applicability.UNSAFE)
        first = legacy[0]
        old = first.keyword.value if first.keyword is not None else "pretrained"
        enum = weights[0] if old == "pretrained" else weights[1]
        known = f" (`pretrained=True` loads `{enum}`)" if enum not in (None, "None", "?") else ""
        self.report(node, self.message.format(old=old, new=NEW_NAME[old], weights=known), fix=fix)

    def _builder(self, node: cst.Call) -> tuple[str, str] | None:
        self._hub_tag_unknown = False
        names = callee_names(self.semantic, node.func)
        if names == ["torch.hub.load"]:
            # torch.hub.load("pytorch/vision[:tag]", "resnet18", ...)
            given = positional(node)
            strings = [a.value.evaluated_value for a in given[:2] if isinstance(a.value, cst.SimpleString)]
            if len(strings) == 2 and isinstance(strings[0], str) and strings[0].split(":")[0] == "pytorch/vision":
                tag = _version(strings[0].partition(":")[2])
                if tag is not None and tag < (0, 13):
                    return None  # a release from before `weights=`: `pretrained` is its API
                self._hub_tag_unknown = tag is None and strings[0].partition(":")[2] not in ("", "main")
                return ("", strings[1]) if ("", strings[1]) in LEGACY_WEIGHTS else None
            return None
        if len(names) != 1 or not names[0].startswith("torchvision.models."):
            return None
        parts = names[0].split(".")[2:]
        sub = parts[0] if len(parts) > 1 and parts[0] in SUBPACKAGES else ""
        return (sub, parts[-1])

    def _new_argument(self, arg: cst.Arg, name: str, weights: str | None) -> cst.Arg | None:
        value = arg.value
        if weights is None:
            return None
        if is_literal(value, "False"):
            new_value: cst.BaseExpression = cst.Name("None")
        elif weights in ("None", "?"):
            return None
        elif is_literal(value, "True"):
            new_value = cst.SimpleString(f'"{weights.rpartition(".")[2]}"')
        elif isinstance(value, (cst.Name, cst.Attribute)):
            new_value = cst.IfExp(
                test=value, body=cst.SimpleString(f'"{weights.rpartition(".")[2]}"'), orelse=cst.Name("None")
            )
        else:
            return None
        return arg.with_changes(keyword=cst.Name(name), value=new_value, equal=arg.equal if arg.keyword is not None else _EQUAL)


def _version(tag: str) -> tuple[int, ...] | None:
    """``(0, 10)`` for a release tag ``v0.10.0``; None for a branch or anything else."""
    numbers = tag.removeprefix("v").split(".")
    if len(numbers) < 2 or not all(n.isdigit() for n in numbers):
        return None
    return tuple(int(n) for n in numbers)
