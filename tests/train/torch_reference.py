#!/usr/bin/env python3
"""Independent reference: our HF export loaded into transformers' GPT2LMHeadModel.

Compares our logits and loss (files written by reference_dump) with PyTorch fp32 on
the same tokens. Error measure for logits: max |ours - ref| / max |ref| over all
B*T*V logits (a max relative error that does not blow up at logits near 0).
Tolerances:
  fp32: logits 1e-4, loss 1e-5 (relative)
  bf16: logits 2e-2, loss 2e-3  (8-bit mantissa: ~4e-3 per rounding; weights and
        activations are all stored rounded. Measured: 4.0e-3 and 1.2e-4)
  fp16: logits 5e-3, loss 5e-4  (11-bit mantissa. Measured: 4.8e-4 and 1.4e-5)
  fp32 measured: 3.7e-7 and 1.4e-8 (torch 2.15.0, transformers from PyPI).
"""
import json
import sys

import numpy as np
import torch
import torch.nn.functional as F
from transformers import GPT2LMHeadModel

TOL = {"fp32": (1e-4, 1e-5), "bf16": (2e-2, 2e-3), "fp16": (5e-3, 5e-4)}


def main(d):
    s = json.load(open(f"{d}/summary.json"))
    B, T, V = s["B"], s["T"], s["V"]
    tok = np.fromfile(f"{d}/tokens.bin", dtype=np.int32)
    inp = torch.tensor(tok[: B * T].reshape(B, T), dtype=torch.long)
    tgt = torch.tensor(tok[B * T :].reshape(B, T), dtype=torch.long)
    kw = {"torch_dtype": torch.float32}
    try:
        model = GPT2LMHeadModel.from_pretrained(f"{d}/hf", attn_implementation="eager", **kw)
    except TypeError:
        model = GPT2LMHeadModel.from_pretrained(f"{d}/hf", **kw)
    model.eval()
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr(), "LM head not tied"
    with torch.no_grad():
        ref = model(inp).logits.float()
    ref_loss = F.cross_entropy(ref.reshape(-1, V), tgt.reshape(-1)).item()
    scale = ref.abs().max().item()
    ok = True
    for dt, (ltol, losstol) in TOL.items():
        ours = torch.from_numpy(np.fromfile(f"{d}/logits-{dt}.bin", dtype=np.float32).reshape(B, T, V))
        err = (ours - ref).abs().max().item() / scale
        loss_err = abs(s["loss"][dt] - ref_loss) / ref_loss
        good = err <= ltol and loss_err <= losstol
        ok &= good
        print(f"{dt}: logits max rel err {err:.3e} (tol {ltol:g}), loss {s['loss'][dt]:.6f} vs torch "
              f"{ref_loss:.6f}, rel err {loss_err:.3e} (tol {losstol:g}) {'OK' if good else 'FAIL'}")
    print(f"torch {torch.__version__}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
