// --shard / --mesh handling shared by partition, verify and run.
#include "cli/shard_flags.h"

#include "import/load.h"
#include "import/shard_spec.h"
#include "sharding/mesh.h"

namespace meshsplit::cli {

void AddShardFlags(CLI::App* app, ShardFlags* flags) {
  app->add_option("--shard", flags->spec,
                  "Sharding spec JSON: mesh + name-glob rules applied before propagation");
  app->add_option("--mesh", flags->mesh,
                  "Device mesh 'data=2,model=4' (overrides the spec's mesh)");
}

StatusOr<std::unique_ptr<Module>> LoadShardedModule(const std::string& path,
                                                    const ShardFlags& flags) {
  MS_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, LoadModule(path));
  if (!flags.spec.empty()) {
    MS_RETURN_IF_ERROR(ApplyShardSpec(*module, flags.spec, flags.mesh));
  } else if (!flags.mesh.empty()) {
    auto mesh = Mesh::Parse(flags.mesh);
    if (!mesh.ok()) return Status::Error("--mesh: " + mesh.status().message());
    module->set_num_partitions(mesh->num_devices());
  }
  return module;
}

}  // namespace meshsplit::cli
