#!/usr/bin/env python3
"""Generates tests/unit/runtime/dot_conv_test.cc: dot and convolution cases
whose expected outputs come from NumPy (np.einsum for dot; for convolution a
direct loop over the StableHLO/XLA definition: lhs dilation, padding, window
dilation, stride, window reversal, feature and batch groups). Inputs are the
small-integer Pattern() of runtime_test_util.h, so float results are exact.

Run: python3 tools/gen_dot_conv_test.py > tests/unit/runtime/dot_conv_test.cc
"""
import numpy as np


def pattern(n, seed=0):
    return np.array([((i * 7 + seed) % 11) - 5 for i in range(n)], dtype=np.float64)


def arr(shape, seed):
    return pattern(int(np.prod(shape)), seed).reshape(shape)


def fmt(a):
    return "{" + ", ".join(str(int(v)) for v in np.asarray(a).ravel()) + "}"


def shape_str(t, shape):
    return "%s[%s]" % (t, ",".join(str(d) for d in shape))


def dims_str(v):
    return "{" + ",".join(str(d) for d in v) + "}"


# ---- dot ---------------------------------------------------------------------
def dot_ref(lhs, rhs, lb, rb, lc, rc):
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ls = [None] * lhs.ndim
    rs = [None] * rhs.ndim
    for a, b in zip(lb, rb):
        ls[a] = rs[b] = next(letters)
    for a, b in zip(lc, rc):
        ls[a] = rs[b] = next(letters)
    for i in range(lhs.ndim):
        if ls[i] is None:
            ls[i] = next(letters)
    for i in range(rhs.ndim):
        if rs[i] is None:
            rs[i] = next(letters)
    out = [ls[a] for a in lb] + [ls[i] for i in range(lhs.ndim) if i not in lb and i not in lc] + \
          [rs[i] for i in range(rhs.ndim) if i not in rb and i not in rc]
    return np.einsum("%s,%s->%s" % ("".join(ls), "".join(rs), "".join(out)), lhs, rhs)


DOTS = [
    # name, lhs shape, rhs shape, lb, rb, lc, rc
    ("Plain", (2, 3), (3, 4), [], [], [1], [0]),
    ("LhsTransposed", (3, 2), (3, 4), [], [], [0], [0]),
    ("RhsTransposed", (2, 3), (4, 3), [], [], [1], [1]),
    ("Batched", (2, 3, 4), (2, 4, 5), [0], [0], [2], [1]),
    ("BatchNotLeading", (3, 2, 4), (4, 5, 2), [1], [2], [2], [0]),
    ("TwoContractingDims", (2, 3, 4, 5), (5, 3, 2, 6), [1], [1], [0, 3], [2, 0]),
    ("VectorVector", (7,), (7,), [], [], [0], [0]),
    ("MatrixVector", (3, 5), (5,), [], [], [1], [0]),
]


def emit_dots(out):
    for name, ls, rs, lb, rb, lc, rc in DOTS:
        lhs, rhs = arr(ls, 1), arr(rs, 2)
        want = dot_ref(lhs, rhs, lb, rb, lc, rc)
        for t in ("f32", "f64", "s32"):
            attrs = "lhs_batch_dims=%s, lhs_contracting_dims=%s, rhs_batch_dims=%s, rhs_contracting_dims=%s" % (
                dims_str(lb), dims_str(lc), dims_str(rb), dims_str(rc))
            attrs = attrs.replace("lhs_batch_dims={}, ", "").replace("rhs_batch_dims={}, ", "")
            hlo = ("HloModule m\\nENTRY e {\\n  a = %s parameter(0)\\n  b = %s parameter(1)\\n"
                   "  ROOT d = %s dot(a, b), %s\\n}\\n") % (shape_str(t, ls), shape_str(t, rs),
                                                            shape_str(t, want.shape), attrs)
            ptype = {"f32": "F32", "f64": "F64", "s32": "S32"}[t]
            out.append("""TEST(Dot, %s_%s) {
  Literal r = RunHlo("%s",
                     {Make(PrimitiveType::%s, %s, Pattern(%d, 1)), Make(PrimitiveType::%s, %s, Pattern(%d, 2))});
  ExpectNear(r, %s, 0);
}
""" % (name, t, hlo, ptype, dims_str(ls), lhs.size, ptype, dims_str(rs), rhs.size, fmt(want)))


# ---- convolution -------------------------------------------------------------
def parse_labels(labels):
    lhs, rest = labels.split("_")
    rhs, out = rest.split("->")

    def spatial(s):
        sp = sorted([(c, i) for i, c in enumerate(s) if c.isdigit()])
        return [i for _, i in sp]
    return dict(ib=lhs.index("b"), if_=lhs.index("f"), isp=spatial(lhs),
                ki=rhs.index("i"), ko=rhs.index("o"), ksp=spatial(rhs),
                ob=out.index("b"), of=out.index("f"), osp=spatial(out))


def conv_canonical(L, K, w):
    """L [N,C,S...], K [O,C,S...] -> [N,O,S...], groups already split."""
    nsp = L.ndim - 2
    # lhs dilation
    sp = L.shape[2:]
    dshape = [(s - 1) * w["lhs_dil"][d] + 1 for d, s in enumerate(sp)]
    D = np.zeros(L.shape[:2] + tuple(dshape))
    D[(slice(None), slice(None)) + tuple(slice(0, None, w["lhs_dil"][d]) for d in range(nsp))] = L
    # padding (negative crops)
    for d in range(nsp):
        lo, hi = w["pad"][d]
        ax = 2 + d
        if lo >= 0:
            D = np.concatenate([np.zeros(D.shape[:ax] + (lo,) + D.shape[ax + 1:]), D], axis=ax)
        else:
            D = np.take(D, range(-lo, D.shape[ax]), axis=ax)
        if hi >= 0:
            D = np.concatenate([D, np.zeros(D.shape[:ax] + (hi,) + D.shape[ax + 1:])], axis=ax)
        else:
            D = np.take(D, range(0, D.shape[ax] + hi), axis=ax)
    ks = K.shape[2:]
    eff = [(k - 1) * w["rhs_dil"][d] + 1 for d, k in enumerate(ks)]
    osp = [(D.shape[2 + d] - eff[d]) // w["stride"][d] + 1 for d in range(nsp)]
    out = np.zeros((L.shape[0], K.shape[0]) + tuple(osp))
    for pos in np.ndindex(*osp):
        for kp in np.ndindex(*ks):
            idx = tuple(pos[d] * w["stride"][d] + kp[d] * w["rhs_dil"][d] for d in range(nsp))
            x = D[(slice(None), slice(None)) + idx]          # [N, C]
            kk = K[(slice(None), slice(None)) + kp]          # [O, C]
            out[(slice(None), slice(None)) + pos] += x @ kk.T
    return out


def conv_ref(lhs, rhs, dn, w, G, BG):
    L = np.transpose(lhs, [dn["ib"], dn["if_"]] + dn["isp"])
    K = np.transpose(rhs, [dn["ko"], dn["ki"]] + dn["ksp"])
    for d in range(len(dn["ksp"])):
        if w["rev"][d]:
            K = np.flip(K, axis=2 + d)
    if BG > 1:
        parts = [conv_canonical(l, k, w) for l, k in zip(np.split(L, BG, 0), np.split(K, BG, 0))]
        out = np.concatenate(parts, axis=1)
    elif G > 1:
        parts = [conv_canonical(l, k, w) for l, k in zip(np.split(L, G, 1), np.split(K, G, 0))]
        out = np.concatenate(parts, axis=1)
    else:
        out = conv_canonical(L, K, w)
    # [N, O, S...] -> result dim order
    perm = [0] * out.ndim
    perm[dn["ob"]] = 0
    perm[dn["of"]] = 1
    for i, d in enumerate(dn["osp"]):
        perm[d] = 2 + i
    inv = np.argsort(perm)
    return np.transpose(out, np.argsort(inv))  # result[d] = out[perm[d]]


CONVS = [
    # name, labels, lhs shape, rhs shape, window dict, G, BG
    ("NhwcPaddedStrided", "b01f_01io->b01f", (1, 5, 5, 2), (3, 3, 2, 3),
     dict(stride=[2, 1], pad=[(1, 1), (0, 2)], lhs_dil=[1, 1], rhs_dil=[1, 1], rev=[0, 0]), 1, 1),
    ("NchwDilatedNegativePad", "bf01_oi01->bf01", (2, 2, 4, 5), (3, 2, 2, 2),
     dict(stride=[1, 2], pad=[(-1, 1), (2, 0)], lhs_dil=[2, 1], rhs_dil=[1, 2], rev=[0, 0]), 1, 1),
    ("FeatureGroups", "b01f_01io->b01f", (2, 4, 4, 4), (2, 2, 2, 6),
     dict(stride=[1, 1], pad=[(0, 0), (1, 0)], lhs_dil=[1, 1], rhs_dil=[1, 1], rev=[0, 0]), 2, 1),
    ("BatchGroups", "f01b_i01o->01bf", (3, 4, 3, 4), (3, 2, 2, 6),
     dict(stride=[1, 1], pad=[(0, 0), (0, 0)], lhs_dil=[1, 1], rhs_dil=[1, 1], rev=[0, 0]), 1, 2),
    ("WindowReversal", "b01f_01io->b01f", (1, 4, 4, 1), (2, 3, 1, 2),
     dict(stride=[1, 1], pad=[(1, 0), (1, 1)], lhs_dil=[1, 1], rhs_dil=[1, 1], rev=[1, 0]), 1, 1),
    ("OneDimensional", "0bf_0io->0bf", (7, 2, 3), (3, 3, 2),
     dict(stride=[2], pad=[(1, 1)], lhs_dil=[1], rhs_dil=[2], rev=[0]), 1, 1),
    ("Depthwise", "b01f_01io->b01f", (1, 3, 3, 3), (2, 2, 1, 3),
     dict(stride=[1, 1], pad=[(0, 0), (0, 0)], lhs_dil=[1, 1], rhs_dil=[1, 1], rev=[0, 0]), 3, 1),
]


def window_str(rs, dn, w):
    ks = [rs[d] for d in dn["ksp"]]
    parts = ["size=" + "x".join(map(str, ks))]
    if any(s != 1 for s in w["stride"]):
        parts.append("stride=" + "x".join(map(str, w["stride"])))
    if any(p != (0, 0) for p in w["pad"]):
        parts.append("pad=" + "x".join("%d_%d" % p for p in w["pad"]))
    if any(d != 1 for d in w["lhs_dil"]):
        parts.append("lhs_dilate=" + "x".join(map(str, w["lhs_dil"])))
    if any(d != 1 for d in w["rhs_dil"]):
        parts.append("rhs_dilate=" + "x".join(map(str, w["rhs_dil"])))
    if any(w["rev"]):
        parts.append("rhs_reversal=" + "x".join(map(str, w["rev"])))
    return "{" + " ".join(parts) + "}"


def emit_convs(out):
    for name, labels, ls, rs, w, G, BG in CONVS:
        dn = parse_labels(labels)
        lhs, rhs = arr(ls, 3), arr(rs, 4)
        want = conv_ref(lhs, rhs, dn, w, G, BG)
        extra = ""
        if G > 1:
            extra += ", feature_group_count=%d" % G
        if BG > 1:
            extra += ", batch_group_count=%d" % BG
        for t in ("f32", "f64"):
            hlo = ("HloModule m\\nENTRY e {\\n  a = %s parameter(0)\\n  b = %s parameter(1)\\n"
                   "  ROOT c = %s convolution(a, b), window=%s, dim_labels=%s%s\\n}\\n") % (
                shape_str(t, ls), shape_str(t, rs), shape_str(t, want.shape), window_str(rs, dn, w), labels, extra)
            ptype = {"f32": "F32", "f64": "F64"}[t]
            out.append("""TEST(Convolution, %s_%s) {
  Literal r = RunHlo("%s",
                     {Make(PrimitiveType::%s, %s, Pattern(%d, 3)), Make(PrimitiveType::%s, %s, Pattern(%d, 4))});
  ExpectNear(r, %s, 0);
}
""" % (name, t, hlo, ptype, dims_str(ls), lhs.size, ptype, dims_str(rs), rhs.size, fmt(want)))


def main():
    out = ["""// GENERATED by tools/gen_dot_conv_test.py -- do not edit by hand.
// dot and convolution against NumPy: np.einsum for dot, and for convolution
// a direct loop over the XLA/StableHLO definition (see the script). Inputs
// are small integers, so results are exact in f32/f64/s32.
#include <gtest/gtest.h>

#include "runtime_test_util.h"

namespace meshsplit::rttest {
namespace {
"""]
    emit_dots(out)
    emit_convs(out)
    out.append("""}  // namespace
}  // namespace meshsplit::rttest
""")
    print("\n".join(out), end="")


if __name__ == "__main__":
    main()
