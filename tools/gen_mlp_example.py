#!/usr/bin/env python3
"""Writes examples/mlp.inputs/param<i>.npy for examples/mlp.hlo and prints the
expected outputs computed with NumPy. Values are small multiples of 1/4 so
every result is exact in float32 (no dependence on summation order).

Run: python3 tools/gen_mlp_example.py   (needs numpy)
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "examples", "mlp.inputs")


def grid(shape, seed):
    n = int(np.prod(shape))
    v = np.array([((i * 5 + seed * 3) % 9) - 4 for i in range(n)], dtype=np.float32) / 4
    return v.reshape(shape)


def main():
    os.makedirs(OUT, exist_ok=True)
    params = [grid((4, 8), 1), grid((8, 16), 2), grid((16,), 3), grid((16, 3), 4), grid((3,), 5)]
    for i, p in enumerate(params):
        np.save(os.path.join(OUT, "param%d.npy" % i), p)
    x, w1, b1, w2, b2 = params
    h = np.maximum(x @ w1 + b1, 0)
    logits = h @ w2 + b2
    print("logits", logits.tolist())
    print("best", logits.max(axis=1).tolist())


if __name__ == "__main__":
    main()
