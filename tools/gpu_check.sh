#!/usr/bin/env bash
# The verifier's CUDA path on a machine with an NVIDIA GPU (never part of CI, which has none).
# Runs the CUDA-marked tests (the script corpus with --device cuda, and the statically fixed
# pairs on both devices), then `torchlint verify` by hand on the hardcoded-CUDA script on each
# device. Needs torch with CUDA, click, pathspec and pyyaml installed; libcst may come as wheels
# in .whl/ (pip download, see the README). Logs go to $OUT when it is set, else to ./gpu-check/.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-check}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
[ -e src/torchlint/rules ] || ln -s ../../rules src/torchlint/rules
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
{ nvidia-smi -L; python3 -c "import torch, libcst; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))"; } 2>&1 | tee "$out/gpu-env.log"
python3 -m pytest -q -p no:cacheprovider -m cuda -rfEs tests/test_verify_scripts.py 2>&1 | tee "$out/gpu-tests.log"
status=$?
for device in cuda cpu; do
    echo "=== torchlint verify --device $device fixtures/scripts/buggy/tl201_bad.py ==="
    python3 -m torchlint verify --device "$device" --limit-batches 4 fixtures/scripts/buggy/tl201_bad.py
    echo "exit status $?"
done 2>&1 | tee "$out/gpu-verify.log"
exit $status
