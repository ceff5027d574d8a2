"""The prescreen's ``candidate`` tests of the rules that replace TorchFix's checks: each holds
back a module that only looks like the pattern, and admits one that has it."""

import pytest

from torchlint.rule import Prescreen
from torchlint.rules import rule_by_code

CANDIDATES = {
    "TL109": ("opt.zero_grad()\nopt.zero_grad\n", "opt.zero_grad(set_to_none=False)\n"),
    "TL604": ("p.require_grad = False\nprint(p.require_grad)\n", "p.require_grad = False\n"),
    "TL605": ("torch.log(2 + x)\ntorch.log(x + 1, out=y)\n", "torch.log(x + 1.0)\n"),
    "TL606": ("torch.exp(x) - 2\n1 - torch.exp(x)\n", "torch.exp(x) - 1\n"),
    "TL607": ("torch.log(torch.sum(e, 1), out=y)\ntorch.log(x)\n", "torch.log(torch.sum(torch.exp(x), 1))\n"),
    "TL807": ("m = models.resnet18(weights=None)\n", "m = models.resnet18(pretrained=True)\n"),
    "TL809": ("import torchvision.models as tvm\nfrom torchvision import models\n", "import torchvision.models as models\n"),
}


@pytest.mark.parametrize("code", sorted(CANDIDATES))
def test_candidate_tests(code: str):
    rule = rule_by_code(code)
    without, with_candidate = CANDIDATES[code]
    assert not Prescreen.of_source("import torch\nimport torchvision\n" + without).admit(rule)
    assert Prescreen.of_source("import torch\nimport torchvision\n" + with_candidate).admit(rule)
