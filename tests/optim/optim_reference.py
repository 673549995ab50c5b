"""Reference optimizers for tests/optim/optimizer_test.cpp, run by /usr/bin/python3 (torch 1.13).

Reads <dir>/config.json, <dir>/init.bin (float32, all tensors concatenated in table order) and
<dir>/grads.bin (float32, steps x total); runs the optimizer and writes <dir>/values.bin (float32,
steps x total: every tensor after every step).
  sgd:  torch.optim.SGD itself, one param group per tensor (weight_decay 0 for exempt ones).
  lars: a line-by-line re-implementation of MLPerf's ResNet LARS, TensorFlow's LARSOptimizer
        (tensorflow/contrib/opt/python/training/lars_optimizer.py, used by the MLPerf TPU and GPU
        ResNet submissions with skip_list=['batch_normalization', 'bias']):
          compute_lr: if not skipped: w_norm = norm(var), g_norm = norm(grad)
                      trust = eeta*w_norm/(g_norm + wd*w_norm + eps) if w_norm > 0 and g_norm > 0 else 1
                      scaled_lr = lr * trust; grad = grad + wd * var
          ApplyMomentum(var, mom, lr=1, grad*scaled_lr, momentum): mom = momentum*mom + grad*scaled_lr
                      var -= mom   (use_nesterov: var -= grad*scaled_lr + momentum*mom)
        in torch float32 tensors, norms in float32 as TensorFlow computes them.
"""
import json
import sys

import numpy as np
import torch


def main(d):
    cfg = json.load(open(d + "/config.json"))
    tensors = cfg["tensors"]
    sizes = [int(np.prod(t["shape"])) for t in tensors]
    total = sum(sizes)
    init = np.fromfile(d + "/init.bin", dtype=np.float32)
    grads = np.fromfile(d + "/grads.bin", dtype=np.float32).reshape(-1, total)
    lrs = cfg["lrs"]
    assert len(lrs) == grads.shape[0] and init.size == total
    offsets = np.cumsum([0] + sizes)
    params = [torch.nn.Parameter(torch.from_numpy(init[offsets[i]:offsets[i + 1]].copy()).reshape(t["shape"]))
              for i, t in enumerate(tensors)]
    out = np.zeros((len(lrs), total), dtype=np.float32)
    o = cfg["options"]
    if cfg["optimizer"] == "sgd":
        groups = [{"params": [p], "weight_decay": 0.0 if t["exempt_decay"] else o["weight_decay"]}
                  for p, t in zip(params, tensors)]
        opt = torch.optim.SGD(groups, lr=lrs[0], momentum=o["momentum"], dampening=o["dampening"],
                              nesterov=o["nesterov"])
        for k, lr in enumerate(lrs):
            for i, p in enumerate(params):
                p.grad = torch.from_numpy(grads[k, offsets[i]:offsets[i + 1]].copy()).reshape(p.shape)
                opt.param_groups[i]["lr"] = lr
            opt.step()
            out[k] = np.concatenate([p.detach().numpy().ravel() for p in params])
    elif cfg["optimizer"] == "lars":
        eeta, wd, eps, mu = o["eta"], o["weight_decay"], o["epsilon"], o["momentum"]
        moms = [torch.zeros_like(p.data) for p in params]
        trust_out = []
        for k, lr in enumerate(lrs):
            trusts = []
            for i, (p, t) in enumerate(zip(params, tensors)):
                var = p.data
                grad = torch.from_numpy(grads[k, offsets[i]:offsets[i + 1]].copy()).reshape(p.shape)
                scaled_lr = torch.tensor(lr, dtype=torch.float32)
                trust = 1.0
                if not t["exempt_decay"]:
                    w_norm = torch.linalg.norm(var.ravel(), 2)
                    g_norm = torch.linalg.norm(grad.ravel(), 2)
                    if w_norm > 0 and g_norm > 0:
                        tr = eeta * w_norm / (g_norm + wd * w_norm + eps)
                        trust = float(tr)
                        scaled_lr = lr * tr
                    grad = grad + wd * var
                trusts.append(trust)
                step = grad * scaled_lr
                moms[i] = mu * moms[i] + step
                if o["nesterov"]:
                    var -= step + mu * moms[i]
                else:
                    var -= moms[i]
            trust_out.append(trusts)
            out[k] = np.concatenate([p.detach().numpy().ravel() for p in params])
        json.dump(trust_out, open(d + "/trust.json", "w"))
    else:
        raise SystemExit("unknown optimizer " + cfg["optimizer"])
    out.tofile(d + "/values.bin")


if __name__ == "__main__":
    with torch.no_grad():
        main(sys.argv[1])
