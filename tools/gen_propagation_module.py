#!/usr/bin/env python3
"""Writes a synthetic HLO module for sharding-propagation timing.

A chain of LAYERS blocks (add, multiply, dot with a shared weight, transpose,
reshape round trip; 7 instructions each) after one annotated parameter. The
same module is built in C++ by bench/bench_propagation.cc.

  tools/gen_propagation_module.py 14300 > /tmp/prop100k.hlo   # ~100k instrs
  meshsplit propagate /tmp/prop100k.hlo --json > /dev/null
"""
import sys


def main():
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 14300
    out = sys.stdout
    out.write("HloModule synthetic, num_partitions=8\n\nENTRY main {\n")
    out.write("  x_0 = f32[64,128] parameter(0), sharding={devices=[8,1]<=[8]}\n")
    out.write("  w = f32[128,128] parameter(1)\n")
    for i in range(layers):
        out.write(f"  add_{i} = f32[64,128] add(x_{i}, x_{i})\n")
        out.write(f"  mul_{i} = f32[64,128] multiply(add_{i}, x_{i})\n")
        out.write(f"  dot_{i} = f32[64,128] dot(mul_{i}, w), "
                  "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n")
        out.write(f"  tr_{i} = f32[128,64] transpose(dot_{i}), dimensions={{1,0}}\n")
        out.write(f"  rs_{i} = f32[128,8,8] reshape(tr_{i})\n")
        out.write(f"  rb_{i} = f32[128,64] reshape(rs_{i})\n")
        out.write(f"  x_{i + 1} = f32[64,128] transpose(rb_{i}), dimensions={{1,0}}\n")
    out.write(f"  ROOT out = f32[64,128] copy(x_{layers})\n}}\n")


if __name__ == "__main__":
    main()
