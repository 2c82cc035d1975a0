#!/usr/bin/env python3
"""Exports a small GPT-2-style training step (forward, cross-entropy loss,
backward, SGD update) to ONNX for the README's main job.

Uses Debian's python3-torch (1.13): the step is traced with functorch's
make_fx into one graph and exported with torch.onnx (opset 13). Graph inputs
are the token ids `idx`, the targets `tgt`, then every parameter under its
GPT-2 name (wte.weight, h.0.attn.c_attn.weight, ...); outputs are `loss` and
`new.<name>` for every updated parameter. Also writes reference inputs and
outputs computed by PyTorch, so `meshsplit` can be checked against them.

Usage: /usr/bin/python3 tools/export_gpt2.py OUT_DIR
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from functorch import make_fx
from torch._decomp import get_decompositions
from torch.nn.utils.stateless import functional_call

# Small enough to partition, run on 1 + 8 virtual devices and verify in well
# under a minute on 2 cores; every size divides the 2 x 4 mesh.
N_LAYER, D, N_HEAD, VOCAB, SEQ, BATCH = 2, 128, 4, 512, 64, 4
LR = 0.1


# Layer norm, softmax, embedding and the loss are written out from elementary
# ops: torch 1.13's ONNX exporter cannot trace the fused backward kernels
# (native_layer_norm_backward, nll_loss_backward, embedding_dense_backward)
# that make_fx records for the library versions.
class LayerNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias


def softmax(x):
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values.detach())
    return e / e.sum(dim=-1, keepdim=True)


def one_hot(idx, n):
    hit = idx.unsqueeze(-1) == torch.arange(n)
    return torch.where(hit, torch.ones(hit.shape), torch.zeros(hit.shape))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(D, 3 * D)
        self.c_proj = nn.Linear(D, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.c_attn(x).split(D, dim=2)
        heads = lambda y: y.view(b, t, N_HEAD, D // N_HEAD).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (D // N_HEAD) ** 0.5)
        mask = torch.arange(t).unsqueeze(1) >= torch.arange(t).unsqueeze(0)
        att = softmax(torch.where(mask, att, torch.full_like(att, -1e9)))
        y = (att @ v).transpose(1, 2).reshape(b, t, D)
        return self.c_proj(y)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(D, 4 * D)
        self.c_proj = nn.Linear(4 * D, D)

    def forward(self, x):
        return self.c_proj(torch.tanh(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = LayerNorm(D)
        self.attn = Attention()
        self.ln_2 = LayerNorm(D)
        self.mlp = Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Parameter(torch.randn(VOCAB, D) * 0.02)
        self.wpe = nn.Parameter(torch.randn(SEQ, D) * 0.02)
        self.h = nn.ModuleList([Block() for _ in range(N_LAYER)])
        self.ln_f = LayerNorm(D)

    def forward(self, idx):
        # Embedding lookup as a one-hot matmul, so its gradient is a matmul too.
        x = one_hot(idx, VOCAB) @ self.wte + self.wpe
        for block in self.h:
            x = block(x)
        # Tied output embedding, as GPT-2 does.
        return self.ln_f(x) @ self.wte.t()


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "examples/gpt2"
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    model = Gpt2()
    names = [n for n, _ in model.named_parameters()]
    params = [p.detach().clone() for _, p in model.named_parameters()]

    def train_step(idx, tgt, *flat):
        ps = [p.requires_grad_() for p in flat]
        state = dict(zip(names, ps))
        logits = functional_call(model, state, (idx,))
        z = logits - logits.max(dim=-1, keepdim=True).values.detach()
        logp = z - torch.log(torch.exp(z).sum(dim=-1, keepdim=True))
        loss = -(logp * one_hot(tgt, VOCAB)).sum() / (BATCH * SEQ)
        grads = torch.autograd.grad(loss, ps)
        return (loss,) + tuple(p - LR * g for p, g in zip(ps, grads))

    idx = torch.randint(0, VOCAB, (BATCH, SEQ))
    tgt = torch.randint(0, VOCAB, (BATCH, SEQ))
    aten = torch.ops.aten
    decompositions = get_decompositions([
        aten.tanh_backward, aten._softmax_backward_data,
        aten._log_softmax_backward_data, aten.native_layer_norm_backward,
        aten.mse_loss_backward, aten.sigmoid_backward])
    graph = make_fx(train_step, decomposition_table=decompositions)(idx, tgt, *params)
    # make_fx records aliasing views the ONNX exporter does not know; they are
    # plain reshapes of contiguous tensors here.
    for node in graph.graph.nodes:
        if node.target in (torch.ops.aten._reshape_alias.default,
                           torch.ops.aten._unsafe_view.default):
            node.target = torch.ops.aten.reshape.default
            node.args = node.args[:2]
    graph.recompile()
    path = os.path.join(out_dir, "gpt2_train_step.onnx")
    torch.onnx.export(graph, (idx, tgt, *params), path, opset_version=13,
                      input_names=["idx", "tgt"] + names,
                      output_names=["loss"] + ["new." + n for n in names],
                      do_constant_folding=True)
    ref = os.path.join(out_dir, "ref")
    os.makedirs(ref, exist_ok=True)
    inputs = [idx, tgt] + params
    for name, t in zip(["idx", "tgt"] + names, inputs):
        np.save(os.path.join(ref, name + ".npy"), t.detach().numpy())
    outs = train_step(idx, tgt, *[p.detach().clone() for p in params])
    for i, t in enumerate(outs):
        np.save(os.path.join(ref, "out%d.npy" % i), t.detach().numpy())
    print("wrote", path, "with", len(names), "parameters; loss", float(outs[0]))


if __name__ == "__main__":
    main()
