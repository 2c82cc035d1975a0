# CTests (LABELS mpi) for `run` / `verify --backend mpi`: outputs byte-identical
# to --backend threads, and a failure on one rank ending every rank.
# Included from src/verify/CMakeLists.txt when ms_collectives_mpi exists.
set(_mpi_dir ${PROJECT_SOURCE_DIR}/tests/mpi)
set(_mpi_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
set(_mpi_work ${PROJECT_BINARY_DIR}/tests/mpi_work)

function(_spmd_mpi_diff name np module flags)
  add_test(NAME spmd_mpi_${name}_np${np}
           COMMAND sh ${_mpi_dir}/backend_diff.sh $<TARGET_FILE:meshsplit> ${MPIEXEC_EXECUTABLE}
                   ${np} ${module} ${_mpi_work}/${name}_np${np} "${flags}" ${ARGN})
  set_tests_properties(spmd_mpi_${name}_np${np} PROPERTIES
                       LABELS mpi TIMEOUT 120 ENVIRONMENT "${_mpi_env}" SKIP_RETURN_CODE 77)
endfunction()

_spmd_mpi_diff(two_way 2 ${_mpi_dir}/two_way.hlo "--num-partitions 2")
_spmd_mpi_diff(partitioned_collectives 2 ${_mpi_dir}/partitioned_collectives.hlo "--partitioned"
               x=8,8)
_spmd_mpi_diff(uneven 3 ${_mpi_dir}/uneven.hlo "--num-partitions 3")
_spmd_mpi_diff(megatron_mlp 4 ${PROJECT_SOURCE_DIR}/examples/strategies/megatron_mlp.hlo
               "--num-partitions 4")
_spmd_mpi_diff(dp_mlp_train 4 ${PROJECT_SOURCE_DIR}/examples/strategies/dp_mlp_train.hlo
               "--num-partitions 4")

add_test(NAME spmd_mpi_verify_np4
         COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np 4
                 $<TARGET_FILE:meshsplit> verify
                 ${PROJECT_SOURCE_DIR}/examples/strategies/attention_heads.hlo --backend mpi)
set_tests_properties(spmd_mpi_verify_np4 PROPERTIES
                     LABELS mpi TIMEOUT 120 ENVIRONMENT "${_mpi_env}"
                     PASS_REGULAR_EXPRESSION "OK: 4 partitions"
                     FAIL_REGULAR_EXPRESSION "error:|MISMATCH")

add_test(NAME spmd_mpi_verify_np2
         COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np 2
                 $<TARGET_FILE:meshsplit> verify ${_mpi_dir}/two_way.hlo --backend mpi --seed 5)
set_tests_properties(spmd_mpi_verify_np2 PROPERTIES
                     LABELS mpi TIMEOUT 120 ENVIRONMENT "${_mpi_env}"
                     PASS_REGULAR_EXPRESSION "OK: 2 partitions"
                     FAIL_REGULAR_EXPRESSION "error:|MISMATCH")

add_test(NAME spmd_mpi_world_size_mismatch
         COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np 2
                 $<TARGET_FILE:meshsplit> verify
                 ${PROJECT_SOURCE_DIR}/examples/strategies/attention_heads.hlo --backend mpi)
set_tests_properties(spmd_mpi_world_size_mismatch PROPERTIES
                     LABELS mpi TIMEOUT 60 ENVIRONMENT "${_mpi_env}"
                     PASS_REGULAR_EXPRESSION "needs one rank per partition.*started 2 ranks")

add_test(NAME spmd_mpi_rank_failure
         COMMAND sh ${_mpi_dir}/rank_failure.sh $<TARGET_FILE:meshsplit> ${MPIEXEC_EXECUTABLE}
                 ${_mpi_dir}/two_way.hlo ${_mpi_work}/rank_failure)
set_tests_properties(spmd_mpi_rank_failure PROPERTIES
                     LABELS mpi TIMEOUT 60 ENVIRONMENT "${_mpi_env}")

# Faults (issue 6): a rank killed (SIGKILL) or frozen (SIGSTOP; caught by the
# watchdog, MESHSPLIT_MPI_TIMEOUT) in the middle of a run, and ranks started
# with different programs. Each must end every rank within 10 s, non-zero,
# with a message, and leave no output files.
foreach(mode kill stop)
  add_test(NAME spmd_mpi_rank_${mode}
           COMMAND sh ${_mpi_dir}/rank_fault.sh ${mode} $<TARGET_FILE:meshsplit>
                   ${MPIEXEC_EXECUTABLE} ${_mpi_dir}/long_loop.hlo ${_mpi_work}/rank_${mode})
  set_tests_properties(spmd_mpi_rank_${mode} PROPERTIES
                       LABELS mpi TIMEOUT 90 ENVIRONMENT "${_mpi_env}")
endforeach()
foreach(case module partitions seed missing)
  add_test(NAME spmd_mpi_different_${case}
           COMMAND sh ${_mpi_dir}/different_programs.sh ${case} $<TARGET_FILE:meshsplit>
                   ${MPIEXEC_EXECUTABLE} ${_mpi_work}/different_${case})
  set_tests_properties(spmd_mpi_different_${case} PROPERTIES
                       LABELS mpi TIMEOUT 60 ENVIRONMENT "${_mpi_env}")
endforeach()

# The same byte-identity without the per-collective agreement.
_spmd_mpi_diff(dp_mlp_train_unchecked 4 ${PROJECT_SOURCE_DIR}/examples/strategies/dp_mlp_train.hlo
               "--num-partitions 4")
set_property(TEST spmd_mpi_dp_mlp_train_unchecked_np4 APPEND PROPERTY ENVIRONMENT
             MESHSPLIT_MPI_CHECK=0)

# Ranks that fall out of step mid-run (same program; partition-id-dependent
# control flow): caught by the per-collective agreement and the end-of-run
# history check, on every rank, within 10 s.
foreach(case trip trip3 args)
  add_test(NAME spmd_mpi_diverge_${case}
           COMMAND sh ${_mpi_dir}/diverge.sh ${case} $<TARGET_FILE:meshsplit>
                   ${MPIEXEC_EXECUTABLE} ${_mpi_work}/diverge_${case})
  set_tests_properties(spmd_mpi_diverge_${case} PROPERTIES
                       LABELS mpi TIMEOUT 60 ENVIRONMENT "${_mpi_env}")
endforeach()

# A real model: the MaxText training step shrunk by the ctest maxtext_verify
# (tests/models/maxtext_verify.sh, which writes the f64 copy), 8 ranks, all 39
# outputs byte-identical to the threads backend.
_spmd_mpi_diff(maxtext_dp8 8 ${PROJECT_BINARY_DIR}/tests/maxtext_verify/dp8_f64.hlo
               "--num-partitions 8")
set_tests_properties(spmd_mpi_maxtext_dp8_np8 PROPERTIES
                     FIXTURES_REQUIRED maxtext_shrunk TIMEOUT 300)
set_property(TEST spmd_mpi_maxtext_dp8_np8 APPEND PROPERTY ENVIRONMENT
             NEEDS_SHARED=models/hlo/maxtext_train_step_dp8.hlo)
