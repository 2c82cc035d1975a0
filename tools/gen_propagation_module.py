#!/usr/bin/env python3
"""Writes a synthetic HLO module for sharding-propagation timing.

Arguments: LAYERS [DEVICES]. A chain of LAYERS blocks (add, multiply, dot with a shared weight, transpose,
reshape round trip; 7 instructions each) after one annotated parameter, tiled
8 ways on dim 0 and replicated over the remaining DEVICES/8 devices. The
same module is built in C++ by bench/bench_propagation.cc.

  tools/gen_propagation_module.py 14300 > /tmp/prop100k.hlo   # ~100k instrs
  tools/gen_propagation_module.py 14300 8192 > /tmp/prop100k_8192.hlo
  meshsplit propagate /tmp/prop100k.hlo --json > /dev/null
"""
import sys


def main():
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 14300
    devices = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    if devices % 8 != 0:
        sys.exit("DEVICES must be a multiple of 8")
    out = sys.stdout
    out.write(f"HloModule synthetic, num_partitions={devices}\n\nENTRY main {{\n")
    if devices == 8:
        sharding = "{devices=[8,1]<=[8]}"
    else:
        sharding = f"{{devices=[8,1,{devices // 8}]<=[{devices}] last_tile_dim_replicate}}"
    out.write(f"  x_0 = f32[64,128] parameter(0), sharding={sharding}\n")
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
