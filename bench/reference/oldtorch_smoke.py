#!/usr/bin/env python3
"""Smoke-test run_ref.py's own code on a torch that predates the reference's dtypes.

The reference needs torch >= 2.8 (float8_e4m3fn, float8_e8m0fnu, float4_e2m1fn_x2); Debian 12's
python3-torch is 1.13. This script stands in one-byte integer dtypes for the three (uint8, bool,
int8), so the reference model can be built, a checkpoint loaded into it (names, shapes, dtypes
and coverage checked exactly as on the GPU) and the timing and --check code paths run end to end.
The numbers it computes are meaningless (the fp8/fp4 casts become integer casts): a --check here
must fail, a benchmark figure means nothing. Arguments are run_ref.py's.

    /usr/bin/python3 bench/reference/oldtorch_smoke.py --model testdata/tiny --device cpu --prefill 8 --decode 2
"""

import os
import sys

import torch

if hasattr(torch, "float8_e8m0fnu"):
    sys.exit("oldtorch_smoke: this torch has the fp8 dtypes; run run_ref.py itself")

torch.float8_e4m3fn = torch.uint8
torch.float8_e8m0fnu = torch.bool
torch.float4_e2m1fn_x2 = torch.int8

_new = torch.nn.Parameter.__new__


def _parameter(cls, data=None, requires_grad=True):
    # integer stand-ins cannot require gradients
    return _new(cls, data, requires_grad and data is not None and data.is_floating_point())


torch.nn.Parameter.__new__ = _parameter
os.environ["DS4_REF_SHIM"] = "1"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_ref  # noqa: E402

if __name__ == "__main__":
    try:
        sys.exit(run_ref.main(sys.argv[1:]))
    except run_ref.BadInput as e:
        print(f"run_ref: {e}", file=sys.stderr)
        sys.exit(2)
