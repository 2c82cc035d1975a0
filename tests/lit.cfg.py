# lit configuration for meshsplit's golden (IR in, IR out) and diagnostic tests.
import os
import lit.formats

config.name = "meshsplit"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".hlo", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.meshsplit_bin_dir, "..", "..", "tests-lit")
config.excludes = ["unit", "property", "mpi", "CMakeLists.txt", "lit.cfg.py", "Inputs"]
config.substitutions.append(("%meshsplit", os.path.join(config.meshsplit_bin_dir, "meshsplit")))
config.substitutions.append(("FileCheck", config.filecheck))
config.substitutions.append(("%shared", os.path.join(config.meshsplit_src_dir, "..", "shared")))
config.environment["PATH"] = config.meshsplit_bin_dir + os.pathsep + os.environ.get("PATH", "")
# Tests reading ../shared (XLA's corpus, the models) say `REQUIRES: shared`;
# without it they are reported UNSUPPORTED (lit runs with --show-unsupported).
shared_dir = os.path.normpath(os.path.join(config.meshsplit_src_dir, "..", "shared"))
if os.path.isdir(shared_dir):
    config.available_features.add("shared")
else:
    lit_config.note("skipped: the tests that REQUIRE 'shared' need ../shared (absent: "
                    + shared_dir + "); README, 'Optional test data', says how to get it")
# LLVM's `not` (for `RUN: not %meshsplit ...` in tests/errors) sits beside FileCheck.
config.environment["PATH"] += os.pathsep + os.path.dirname(config.filecheck)
# Tests reading an ONNX model (examples/gpt2) say `REQUIRES: onnx`: they need
# a build with the ONNX importer (libonnx-dev); without it they are reported
# UNSUPPORTED, not passed.
import subprocess
_gpt2 = os.path.join(config.meshsplit_src_dir, "examples", "gpt2", "gpt2_train_step.onnx")
try:
    if subprocess.run([os.path.join(config.meshsplit_bin_dir, "meshsplit"), "import", _gpt2,
                       "-o", os.devnull], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                      timeout=60).returncode == 0:
        config.available_features.add("onnx")
except (OSError, subprocess.SubprocessError):
    pass
