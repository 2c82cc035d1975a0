// Failure behaviour of the threads backend: bad or mismatched arguments give
// an error on every device (and the world stays usable), a failing device
// aborts the others within bounded time instead of leaving them waiting, and
// a device that leaves early is reported rather than waited for.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "collectives/collectives.h"
#include "collectives/threads_backend.h"
#include "collectives_test_util.h"

namespace meshsplit {
namespace {

using Clock = std::chrono::steady_clock;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Runs `op` on every device, records every device's status, then runs one
// correct all-reduce to prove the world is still in step.
std::vector<Status> RunAndRecover(
    int n, const std::function<Status(int, Communicator&)>& op) {
  std::vector<Status> statuses(n);
  std::vector<int64_t> after(n, -1);
  Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
    statuses[d] = op(d, c);
    int64_t one = 1;
    return c.AllReduce(&one, &after[d], PrimitiveType::S64, 1,
                       ReductionKind::kAdd, {});
  });
  EXPECT_TRUE(s.ok()) << "world not usable after the error: " << s.message();
  for (int d = 0; d < n; ++d) EXPECT_EQ(after[d], n);
  return statuses;
}

void ExpectAllFail(const std::vector<Status>& statuses, const std::string& part) {
  for (size_t d = 0; d < statuses.size(); ++d) {
    EXPECT_FALSE(statuses[d].ok()) << "device " << d;
    EXPECT_TRUE(Contains(statuses[d].message(), part))
        << "device " << d << ": " << statuses[d].message();
  }
}

TEST(ThreadsErrorsTest, CountMismatch) {
  for (int n : {2, 3, 8}) {
    auto st = RunAndRecover(n, [](int d, Communicator& c) {
      float buf[8] = {};
      return c.AllReduce(buf, buf, PrimitiveType::F32, d == 1 ? 4 : 8,
                         ReductionKind::kAdd, {});
    });
    ExpectAllFail(st, "disagree");
    EXPECT_TRUE(Contains(st[0].message(), "f32[4]")) << st[0].message();
  }
}

TEST(ThreadsErrorsTest, OpMismatch) {
  auto st = RunAndRecover(3, [](int d, Communicator& c) {
    int32_t in[6] = {}, out[18] = {};
    int64_t dims[] = {6};
    if (d == 2) return c.AllGather(in, out, PrimitiveType::S32, dims, 0, {});
    return c.AllReduce(in, out, PrimitiveType::S32, 6, ReductionKind::kAdd, {});
  });
  ExpectAllFail(st, "all-gather");
}

TEST(ThreadsErrorsTest, GroupMismatchBetweenDevices) {
  auto st = RunAndRecover(4, [](int d, Communicator& c) {
    int32_t v = d, out = 0;
    CommGroups groups = d == 0 ? CommGroups{{0, 1}, {2, 3}} : CommGroups{{0, 2}, {1, 3}};
    return c.AllReduce(&v, &out, PrimitiveType::S32, 1, ReductionKind::kAdd, groups);
  });
  ExpectAllFail(st, "disagree");
}

TEST(ThreadsErrorsTest, BadGroups) {
  struct Case {
    CommGroups groups;
    std::string message;
  };
  std::vector<Case> cases = {
      {{{0, 1}, {2}}, "device 3 is in no replica group"},
      {{{0, 1}, {1, 2, 3}}, "more than one"},
      {{{0, 1, 2, 7}}, "out of range"},
      {{{0, 1}, {}, {2, 3}}, "empty"},
  };
  for (const Case& tc : cases) {
    auto st = RunAndRecover(4, [&](int d, Communicator& c) {
      int32_t v = d, out = 0;
      return c.AllReduce(&v, &out, PrimitiveType::S32, 1, ReductionKind::kAdd,
                         tc.groups);
    });
    ExpectAllFail(st, tc.message);
  }
  // Unequal group sizes are fine for all-reduce but not for all-gather.
  auto st = RunAndRecover(4, [](int d, Communicator& c) {
    int32_t v = d, out[4] = {};
    int64_t dims[] = {1};
    return c.AllGather(&v, out, PrimitiveType::S32, dims, 0, {{0}, {1, 2, 3}});
  });
  ExpectAllFail(st, "different sizes");
}

TEST(ThreadsErrorsTest, BadShapesAndKinds) {
  auto st = RunAndRecover(4, [](int d, Communicator& c) {
    float in[6] = {}, out[6] = {};
    int64_t dims[] = {2, 3};
    return c.ReduceScatter(in, out, PrimitiveType::F32, dims, 1,
                           ReductionKind::kAdd, {});
  });
  ExpectAllFail(st, "not divisible by the group size 4");

  st = RunAndRecover(2, [](int d, Communicator& c) {
    float in[6] = {}, out[6] = {};
    int64_t dims[] = {2, 3};
    return c.AllToAll(in, out, PrimitiveType::F32, dims, 1, 0, {});
  });
  ExpectAllFail(st, "not divisible");

  st = RunAndRecover(2, [](int d, Communicator& c) {
    float in[6] = {}, out[12] = {};
    int64_t dims[] = {2, 3};
    return c.AllGather(in, out, PrimitiveType::F32, dims, 2, {});
  });
  ExpectAllFail(st, "out of range for rank 2");

  st = RunAndRecover(2, [](int d, Communicator& c) {
    float in[2] = {}, out[2] = {};
    return c.AllReduce(in, out, PrimitiveType::F32, 2, ReductionKind::kXor, {});
  });
  ExpectAllFail(st, "'xor' is not supported for element type f32");

  st = RunAndRecover(3, [](int d, Communicator& c) {
    float in[2] = {}, out[2] = {};
    return c.CollectivePermute(in, out, PrimitiveType::F32, 2, {{0, 1}, {2, 1}});
  });
  ExpectAllFail(st, "target of more than one pair");

  st = RunAndRecover(3, [](int d, Communicator& c) {
    int32_t in[3][2] = {}, out[3][2] = {};
    std::vector<const void*> ins = {in[0], in[1]};
    std::vector<void*> outs = {out[0], out[1]};
    return c.AllToAllTuple(ins, outs, PrimitiveType::S32, 2, {});
  });
  ExpectAllFail(st, "2 operands");
}

// Only one device has a bad argument: the others' arguments are fine, yet
// all of them report the error (and nobody waits for the bad one).
TEST(ThreadsErrorsTest, LocalErrorOnOneDeviceReachesAll) {
  auto st = RunAndRecover(4, [](int d, Communicator& c) {
    float in[2] = {}, out[2] = {};
    ReductionKind kind = d == 3 ? ReductionKind::kAnd : ReductionKind::kAdd;
    return c.AllReduce(in, out, PrimitiveType::F32, 2, kind, {});
  });
  ExpectAllFail(st, "'and' is not supported");
  EXPECT_TRUE(Contains(st[0].message(), "reported by device 3")) << st[0].message();
}

// A device fails before its first collective: the others, already waiting,
// must return an error promptly.
TEST(ThreadsErrorsTest, FailingDeviceAbortsOthers) {
  for (int n : {2, 4, 8}) {
    std::vector<Status> statuses(n);
    std::vector<double> seconds(n, 0);
    Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
      if (d == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return Status::Error("interpreter failed: boom");
      }
      auto start = Clock::now();
      float v[4] = {};
      Status r;
      for (int i = 0; i < 1000 && r.ok(); ++i)
        r = c.AllReduce(v, v, PrimitiveType::F32, 4, ReductionKind::kAdd, {});
      seconds[d] = std::chrono::duration<double>(Clock::now() - start).count();
      statuses[d] = r;
      return r;
    });
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message(), "interpreter failed: boom");  // the root cause
    for (int d = 0; d < n; ++d) {
      if (d == 1) continue;
      EXPECT_FALSE(statuses[d].ok());
      EXPECT_TRUE(Contains(statuses[d].message(), "device 1 failed: interpreter failed: boom"))
          << statuses[d].message();
      EXPECT_LT(seconds[d], 5.0) << "device " << d << " waited too long";
    }
  }
}

// Failure in the middle of a run of collectives, and through Abort() called
// directly on a communicator.
TEST(ThreadsErrorsTest, AbortMidRun) {
  const int n = 4;
  std::atomic<int> errors{0};
  Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
    for (int i = 0; i < 200; ++i) {
      if (d == 2 && i == 57) {
        c.Abort("out of memory");
        return Status::Ok();  // even a device that "returns OK" after Abort
      }
      int32_t v = i, out = 0;
      Status r = c.AllReduce(&v, &out, PrimitiveType::S32, 1, ReductionKind::kAdd, {});
      if (!r.ok()) {
        ++errors;
        return r;
      }
    }
    return Status::Ok();
  });
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "device 2 failed: out of memory")) << s.message();
  EXPECT_EQ(errors.load(), n - 1);
}

TEST(ThreadsErrorsTest, ThrowingDeviceAbortsOthers) {
  Status s = testing::RunWithDeadline(3, [&](int d, Communicator& c) -> Status {
    if (d == 0) throw std::runtime_error("bad alloc somewhere");
    return c.Barrier();
  });
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "exception on device 0: bad alloc somewhere"))
      << s.message();
}

// A device that returns OK while another still waits in a collective: the
// waiter gets an error naming the device that left.
TEST(ThreadsErrorsTest, DeviceLeavingEarlyIsReported) {
  for (int n : {2, 3, 8}) {
    std::vector<Status> statuses(n);
    Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
      if (d == n - 1) return Status::Ok();  // skips the collective
      statuses[d] = c.Barrier();
      return statuses[d];
    });
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(Contains(s.message(), "returned while device")) << s.message();
    for (int d = 0; d + 1 < n; ++d)
      EXPECT_TRUE(Contains(statuses[d].message(),
                           "device " + std::to_string(n - 1) + " failed"))
          << statuses[d].message();
  }
}

// A world can host several runs: devices that finished one run are not
// mistaken for devices that left early in the next.
TEST(ThreadsErrorsTest, WorldReusedAcrossRuns) {
  ThreadsWorld world(3);
  for (int run = 0; run < 3; ++run) {
    Status s = RunOnThreads(world, [&](int d, Communicator& c) {
      int32_t v = d + run, out = 0;
      MS_RETURN_IF_ERROR(
          c.AllReduce(&v, &out, PrimitiveType::S32, 1, ReductionKind::kAdd, {}));
      return out == 3 + 3 * run ? Status::Ok() : Status::Error("wrong sum");
    });
    EXPECT_TRUE(s.ok()) << "run " << run << ": " << s.message();
  }
}

// The futex slow path: with no spinning and no yielding every waiter goes to
// sleep at once; releases, aborts and early exits must still wake it.
TEST(ThreadsErrorsTest, SleepingWaitersAreWoken) {
  for (int n : {2, 5}) {
    ThreadsWorld world(n);
    world.set_wait_policy(/*spin_microseconds=*/0, /*yield_microseconds=*/0);
    Status s = RunOnThreads(world, [&](int d, Communicator& c) {
      for (int r = 0; r < 300; ++r) {
        int32_t v = d, out = 0;
        MS_RETURN_IF_ERROR(
            c.AllReduce(&v, &out, PrimitiveType::S32, 1, ReductionKind::kAdd, {}));
        if (out != n * (n - 1) / 2) return Status::Error("wrong sum");
      }
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.message();

    ThreadsWorld aborting(n);
    aborting.set_wait_policy(0, 0);
    s = RunOnThreads(aborting, [&](int d, Communicator& c) {
      if (d == n - 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        return Status::Error("late failure");
      }
      return c.Barrier();
    });
    EXPECT_EQ(s.message(), "late failure");

    ThreadsWorld leaving(n);
    leaving.set_wait_policy(0, 0);
    s = RunOnThreads(leaving, [&](int d, Communicator& c) {
      if (d == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        return Status::Ok();
      }
      return c.Barrier();
    });
    EXPECT_TRUE(Contains(s.message(), "returned while device")) << s.message();
  }
}

// After an abort the world is dead: later collectives fail at once.
TEST(ThreadsErrorsTest, AbortedWorldStaysAborted) {
  ThreadsWorld world(2);
  world.Abort(0, "gone");
  EXPECT_TRUE(world.aborted());
  int32_t v = 0;
  Status s = world.communicator(1).AllReduce(&v, &v, PrimitiveType::S32, 1,
                                             ReductionKind::kAdd, {});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "device 0 failed: gone")) << s.message();
  Status r = RunOnThreads(0, [](int, Communicator&) { return Status::Ok(); });
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace meshsplit
