#!/usr/bin/python3
"""PyTorch side of the bf16 model comparison (run live by bf16_torch_compare_test.cpp).

  --model M --weights W.h5 --out O.h5 ...   one training step (train-mode BN) in fp32 and under
                                            torch.cpu.amp.autocast(dtype=torch.bfloat16), each from
                                            the same weights on the same batch (NHWC images, written
                                            to O.h5): fp32/logits, fp32/loss, fp32/grad/<name>, and
                                            the same under bf16/. The loss is fp32 in both (outside
                                            autocast, on the logits cast to fp32).
"""
import argparse
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "weights"))
from cifar_resnet import build_model  # noqa: E402
from h5_to_torch import load_into, read_h5  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--weights", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(2)
    state, _ = read_h5(a.weights)
    rng = np.random.default_rng(a.seed)
    images = rng.standard_normal((a.batch, a.size, a.size, a.in_channels)).astype(np.float32)
    labels = rng.integers(0, a.classes, a.batch).astype(np.int32)
    with h5py.File(a.out, "w") as f:
        f["images"] = images
        f["labels"] = labels
        for mode in ("fp32", "bf16"):
            model = load_into(build_model(a.model, a.classes, a.in_channels, 0), state)
            model.train()
            x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
            if mode == "bf16":
                with torch.cpu.amp.autocast(dtype=torch.bfloat16):
                    logits = model(x)
            else:
                logits = model(x)
            logits = logits.float()
            loss = F.cross_entropy(logits, torch.from_numpy(labels).long(),
                                   label_smoothing=a.label_smoothing)
            loss.backward()
            f[mode + "/logits"] = logits.detach().numpy()
            f[mode + "/loss"] = np.array([loss.item()], dtype=np.float64)
            for name, prm in model.named_parameters():
                f[mode + "/grad/" + name] = prm.grad.float().numpy()


if __name__ == "__main__":
    main()
