// A program outside the meshsplit tree that uses the installed library
// (find_package(meshsplit), target meshsplit::meshsplit): builds a mesh and a
// Megatron-style spec for a two-layer MLP, partitions it over 4 devices,
// runs it on host arrays and verifies the partitioned program against one
// device. Exits non-zero when anything disagrees.
#include <cstdio>
#include <cstring>
#include <vector>

#include <meshsplit/meshsplit.h>

namespace ms = meshsplit::api;

constexpr const char* kMlp = R"(HloModule mlp
ENTRY main {
  x = f32[4,8] parameter(0)
  w1 = f32[8,16] parameter(1)
  w2 = f32[16,2] parameter(2)
  h = f32[4,16] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT y = f32[4,2] dot(h, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
)";

ms::HostArray Filled(std::vector<int64_t> shape, float value) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(n, value);
  ms::HostArray a{"f32", std::move(shape), std::vector<uint8_t>(n * sizeof(float))};
  std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

int main() {
  try {
    ms::Mesh mesh({{"data", 2}, {"model", 2}});
    ms::NamedSharding col(mesh, ms::PartitionSpec{{{}, {"model"}}});
    std::printf("w1 sharding: %s\n", col.HloSharding(2).c_str());

    ms::Module m = ms::Parse(kMlp, "mlp.hlo");
    ms::ShardSpec spec;
    spec.mesh = mesh;
    spec.rules = {{"x", false, ms::PartitionSpec{{{"data"}, {}}}},
                  {"w1", false, ms::PartitionSpec{{{}, {"model"}}}},
                  {"w2", false, ms::PartitionSpec{{{"model"}, {}}}}};
    ms::PartitionResult p = ms::Partition(m, &spec);
    std::printf("%lld partitions, collectives:", static_cast<long long>(p.num_partitions));
    for (const auto& [op, n] : p.collectives) std::printf(" %s=%lld", op.c_str(), static_cast<long long>(n));
    std::printf("\n");

    // x = 1, w1 = 0.5, w2 = 0.25: every output is 8 * 0.5 * 16 * 0.25 = 16.
    std::vector<ms::HostArray> out =
        ms::Run(m, {Filled({4, 8}, 1), Filled({8, 16}, 0.5f), Filled({16, 2}, 0.25f)}, &spec);
    const float* y = reinterpret_cast<const float*>(out.at(0).data.data());
    for (int i = 0; i < 8; ++i)
      if (y[i] != 16.0f) {
        std::printf("wrong output %d: %g\n", i, y[i]);
        return 1;
      }
    ms::VerifyReport r = ms::Verify(m, &spec, /*seed=*/0);
    std::printf("verify: %s, max abs error %g\n", r.status.c_str(), r.max_abs_error);
    return r.ok ? 0 : 1;
  } catch (const ms::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
