#!/usr/bin/python3
"""PyTorch side of the engine's comparison tests (run live by torch_compare_test.cpp).

  grads --model M --weights W.h5 --out O.h5 ...   one training step's logits, loss, gradients and
                                                  updated BN buffers, on a batch it writes to O.h5
  make-weights --model M OUT.h5 OUT.pth           random weights with random BN statistics
  check-same A.pth B.h5                           every tensor bit-identical (dtype too), else exit 1
  train --model M --weights W.h5 --out O.h5 ...   the loss of 10 training steps with SGD (torch.optim.SGD,
                                                  momentum, weight decay, BN/bias exempt) and with MLPerf's
                                                  LARS (TensorFlow's LARSOptimizer rule), on batches it
                                                  writes to O.h5
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
from torch_to_h5 import write_h5  # noqa: E402


def model_from(a):
    return build_model(a.model, a.classes, a.in_channels, a.width)


def grads(a):
    torch.set_num_threads(2)
    state, _ = read_h5(a.weights)
    model = load_into(model_from(a), state)
    model.train()
    rng = np.random.default_rng(a.seed)
    images = rng.standard_normal((a.batch, a.size, a.size, a.in_channels)).astype(np.float32)  # NHWC
    labels = rng.integers(0, a.classes, a.batch).astype(np.int32)
    x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    logits = model(x)
    loss = F.cross_entropy(logits, torch.from_numpy(labels).long(), label_smoothing=a.label_smoothing)
    loss.backward()
    with h5py.File(a.out, "w") as f:
        f["images"] = images
        f["labels"] = labels
        f["logits"] = logits.detach().numpy()
        f["loss"] = np.array([loss.item()], dtype=np.float64)
        for name, p in model.named_parameters():
            f["grad/" + name] = p.grad.numpy()
        for name, b in model.named_buffers():
            f["buffer/" + name] = b.numpy().astype(np.float32)


def lars_step(params, moms, lr, eta, wd, eps, mu):
    """MLPerf's ResNet LARS (TF LARSOptimizer, skip_list batch_normalization/bias): exempt = dim <= 1."""
    with torch.no_grad():
        for i, p in enumerate(params):
            grad, var = p.grad, p.data
            scaled_lr = lr
            if p.dim() > 1:
                w_norm, g_norm = torch.linalg.norm(var.ravel()), torch.linalg.norm(grad.ravel())
                if w_norm > 0 and g_norm > 0:
                    scaled_lr = lr * (eta * w_norm / (g_norm + wd * w_norm + eps))
                grad = grad + wd * var
            moms[i] = mu * moms[i] + grad * scaled_lr
            var -= moms[i]


def train(a):
    torch.set_num_threads(2)
    state, _ = read_h5(a.weights)
    rng = np.random.default_rng(a.seed)
    # one batch, seen every step: the model fits it, so the loss curve falls
    batch = (rng.standard_normal((a.batch, a.size, a.size, a.in_channels)).astype(np.float32),
             rng.integers(0, a.classes, a.batch).astype(np.int32))
    batches = [batch] * a.steps
    curves = {}
    for optimizer in ("sgd", "lars"):
        model = load_into(model_from(a), state)
        model.train()
        params = list(model.parameters())
        if optimizer == "sgd":
            groups = [{"params": [p], "weight_decay": 0.0 if p.dim() <= 1 else a.weight_decay} for p in params]
            opt = torch.optim.SGD(groups, lr=a.sgd_lr, momentum=0.9, nesterov=True)
        else:
            moms = [torch.zeros_like(p) for p in params]
        losses = []
        for images, labels in batches:
            x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
            loss = F.cross_entropy(model(x), torch.from_numpy(labels).long(), label_smoothing=a.label_smoothing)
            model.zero_grad()
            loss.backward()
            if optimizer == "sgd":
                opt.step()
            else:
                lars_step(params, moms, a.lars_lr, 0.001, a.weight_decay, 0.0, 0.9)
            losses.append(loss.item())
        curves[optimizer] = (losses, model.state_dict())
    with h5py.File(a.out, "w") as f:
        for k, (images, labels) in enumerate(batches):
            f[f"images/{k}"] = images
            f[f"labels/{k}"] = labels
        for optimizer, (losses, final) in curves.items():
            f[optimizer + "/loss"] = np.array(losses, dtype=np.float64)
            for key, t in final.items():
                f[f"{optimizer}/final/{key}"] = t.numpy().astype(np.float32)


def make_weights(a):
    torch.manual_seed(a.seed)
    model = model_from(a)
    state = model.state_dict()
    g = torch.Generator().manual_seed(a.seed + 1)
    for key, t in state.items():  # make every tensor non-trivial, including BN statistics
        if key.endswith("num_batches_tracked"):
            t.fill_(12345)
        elif key.endswith("running_var"):
            t.copy_(torch.rand(t.shape, generator=g) + 0.5)
        elif t.dtype == torch.float32 and t.dim() <= 1:
            t.copy_(torch.randn(t.shape, generator=g))
    torch.save(state, a.pth)
    write_h5(state, a.h5, a.model)


def check_same(a):
    expected = torch.load(a.pth)
    state, _ = read_h5(a.h5)
    bad = [k for k in expected if k not in state or state[k].dtype != expected[k].dtype
           or state[k].shape != expected[k].shape or not torch.equal(state[k], expected[k])]
    bad += [k for k in state if k not in expected]
    if bad:
        print(f"{len(bad)} tensors differ, e.g. {bad[:5]}")
        sys.exit(1)
    print(f"all {len(expected)} tensors bit-identical")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("grads", "make-weights", "train"):
        s = sub.add_parser(name)
        s.add_argument("--model", required=True)
        s.add_argument("--classes", type=int, default=10)
        s.add_argument("--in-channels", type=int, default=3)
        s.add_argument("--width", type=int, default=0)
        s.add_argument("--seed", type=int, default=1)
    g = sub.choices["grads"]
    g.add_argument("--weights", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--batch", type=int, default=2)
    g.add_argument("--size", type=int, default=32)
    g.add_argument("--label-smoothing", type=float, default=0.1)
    t = sub.choices["train"]
    t.add_argument("--weights", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--size", type=int, default=16)
    t.add_argument("--steps", type=int, default=10)
    t.add_argument("--label-smoothing", type=float, default=0.1)
    t.add_argument("--weight-decay", type=float, default=5e-4)
    t.add_argument("--sgd-lr", type=float, default=0.05)
    t.add_argument("--lars-lr", type=float, default=2.0)
    m = sub.choices["make-weights"]
    m.add_argument("h5")
    m.add_argument("pth")
    c = sub.add_parser("check-same")
    c.add_argument("pth")
    c.add_argument("h5")
    a = p.parse_args()
    {"grads": grads, "make-weights": make_weights, "check-same": check_same, "train": train}[a.command](a)


if __name__ == "__main__":
    main()
