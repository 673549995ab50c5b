#!/usr/bin/python3
"""PyTorch side of the engine's comparison tests (run live by torch_compare_test.cpp).

  grads --model M --weights W.h5 --out O.h5 ...   one training step's logits, loss, gradients and
                                                  updated BN buffers, on a batch it writes to O.h5;
                                                  --kink-margin E --cleared-weights C.h5: first moves
                                                  BN biases so no ReLU input is within E x RMS of 0
                                                  (C.h5: the weights the step ran on)
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


def clear_relu_kinks(a, state, x, margin):
    """Shifts batch-norm biases until no ReLU input of the training forward lies within
    margin x (its tensor's RMS) of zero; returns the new state and the biases moved.

    A ReLU input that close to its kink flips under a kernel's legitimate fp32 rounding (about
    1e-6 of the RMS deep in ResNet-50), and one flipped element changes a deep BN's bias gradient
    by percents (seen: 1.3e-2 at layer4.0.bn1.bias, one channel). The ReLU's input is the last
    batch norm's output plus, at a block's end, the shortcut, so adding to that BN's bias moves
    it as a whole. Layers are cleared in the order they run, each by a fresh forward (a bias only
    moves what comes after it); the running statistics stay as given."""
    moved = 0
    for _ in range(400):
        model = load_into(model_from(a), state)
        model.train()
        calls, last_bn = [], [None]
        hooks = []
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                hooks.append(mod.register_forward_hook(
                    lambda m, i, o, name=name: last_bn.__setitem__(0, name)))
            if isinstance(mod, torch.nn.ReLU):
                hooks.append(mod.register_forward_pre_hook(  # before an in-place ReLU
                    lambda m, i: calls.append((last_bn[0], i[0].detach().clone()))))
        with torch.no_grad():
            model(x)
        for h in hooks:
            h.remove()
        for bn, pre in calls:
            rms = float(pre.pow(2).mean().sqrt())
            near = (pre.abs() < margin * rms).transpose(0, 1).flatten(1).any(1)  # channels near 0
            if bool(near.any()):
                bias = state[bn + ".bias"].clone()
                bias[near] += 4 * margin * rms
                state = dict(state)
                state[bn + ".bias"] = bias
                moved += int(near.sum())
                break
        else:
            return state, moved
    raise RuntimeError(f"{a.model}: ReLU inputs still within {margin} of zero after 400 passes")


def grads(a):
    torch.set_num_threads(2)
    state, _ = read_h5(a.weights)
    rng = np.random.default_rng(a.seed)
    images = rng.standard_normal((a.batch, a.size, a.size, a.in_channels)).astype(np.float32)  # NHWC
    labels = rng.integers(0, a.classes, a.batch).astype(np.int32)
    x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    if a.kink_margin > 0:
        state, moved = clear_relu_kinks(a, state, x, a.kink_margin)
        write_h5(state, a.cleared_weights, a.model)
        print(f"{a.model}: {moved} batch-norm bias channels moved off ReLU kinks", file=sys.stderr)
    model = load_into(model_from(a), state)
    model.train()
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
    g.add_argument("--kink-margin", type=float, default=0.0,
                   help="move BN biases so no ReLU input is within this x its RMS of zero")
    g.add_argument("--cleared-weights", help="with --kink-margin: the weights it ran on")
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
