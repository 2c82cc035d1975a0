// The `threads` collectives backend: N virtual devices in one process, one
// thread each, exchanging data through shared memory. Devices meet at a
// spin-then-yield barrier: no sleeping in the kernel while partners are close
// behind, which matters for the many tiny collectives of a partitioned
// program. Only a wait that outlasts the yield phase (a partner busy in a long
// computation, or an overloaded machine) falls back to a futex sleep. Each
// device publishes pointers to its buffers and reads what it needs from the
// others directly.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/collectives.h"

namespace meshsplit {

// One group of N virtual devices and their communicators. The world outlives
// every call on its communicators. After an Abort (or a device leaving while
// others wait in a collective) the world is dead: every collective, current
// or later, returns an error.
class ThreadsWorld {
 public:
  explicit ThreadsWorld(int64_t num_devices);
  ~ThreadsWorld();
  ThreadsWorld(const ThreadsWorld&) = delete;
  ThreadsWorld& operator=(const ThreadsWorld&) = delete;

  int64_t num_devices() const { return num_devices_; }
  // REQUIRES: 0 <= device < num_devices(). Use from that device's thread only.
  Communicator& communicator(int64_t device);

  // Marks device `device` as failed with `message`; wakes every waiter.
  void Abort(int64_t device, const std::string& message);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // Declares that `device` will call no more collectives. A device still
  // waiting in (or later entering) a collective then fails with an error
  // naming it, instead of waiting for a partner that will never come.
  void MarkFinished(int64_t device);

  // How a device waits at a rendezvous: busy-wait with a CPU pause for
  // `spin_microseconds`, then std::this_thread::yield() for up to
  // `yield_microseconds` more, then sleep on a futex until the last device
  // arrives. The defaults depend on whether the devices outnumber the
  // hardware threads. Set before any collective runs.
  // Both times are maxima: each device shrinks its spin (and, in proportion,
  // yield) time while waits keep running past it, and grows it back when
  // partners arrive within it again (see Rendezvous).
  void set_wait_policy(int64_t spin_microseconds, int64_t yield_microseconds);

 private:
  friend class ThreadsCommunicator;
  friend Status RunOnThreads(
      ThreadsWorld& world,
      const std::function<Status(int device, Communicator&)>& fn);
  struct Slot;

  // Waits until all devices arrive. Returns an error if the world is or
  // becomes aborted, or a device finished early.
  Status Rendezvous(int64_t device);
  Status AbortedStatus() const;
  // Wakes devices sleeping in Rendezvous (they re-check the barrier state).
  void WakeSleepers();

  const int64_t num_devices_;
  int64_t spin_microseconds_ = 0;
  int64_t yield_microseconds_ = 0;
  std::vector<std::unique_ptr<Communicator>> communicators_;
  std::unique_ptr<Slot[]> slots_;

  // Barrier state, each on its own cache line: arrivals count up to N, the
  // last arrival resets the count and bumps the generation waiters watch.
  alignas(64) std::atomic<int64_t> arrived_{0};
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<bool> aborted_{false};
  std::atomic<int64_t> finished_device_{-1};
  // Futex word and sleeper count of the slow path: a releaser or an abort
  // bumps wake_word_ and notifies only when someone may be asleep.
  alignas(64) std::atomic<uint32_t> wake_word_{0};
  std::atomic<int64_t> sleepers_{0};
  mutable std::mutex abort_mu_;
  std::string abort_message_;  // set once, before aborted_ becomes true
};

// Runs fn(device, communicator) on one thread per device of a fresh
// ThreadsWorld and joins them. A device whose fn returns an error (or throws)
// aborts the world so the others stop waiting. Returns the first error in
// time (the root cause; the others are its consequences), or OK.
Status RunOnThreads(int num_devices,
                    const std::function<Status(int device, Communicator&)>& fn);

// The same on an existing world (e.g. to set its wait policy first, or to
// run several times on one world). REQUIRES: no other run on `world` is in
// progress.
Status RunOnThreads(ThreadsWorld& world,
                    const std::function<Status(int device, Communicator&)>& fn);

// The most virtual devices one threads-backend run takes. Each device is a
// thread with its own interpreter state, and the rendezvous cost grows with
// the count (a small MLP verifies on 1024 devices in 1.7 s and 280 MiB; 4096
// take over a minute; 131072, from a mesh axis typed as 65536, exhausted a
// 32 GiB machine). Past it a run is refused with an error before any thread
// or per-device state exists; XLA's largest partitioning test uses 1536.
inline constexpr int64_t kMaxThreadsBackendDevices = 2048;
// Ok, or an error naming `num_devices`, the limit and the mpi backend.
Status CheckThreadsBackendDevices(int64_t num_devices);

// Stack size of each device thread (device 0 runs on the caller's thread)
// when `num_devices` devices run: 8 MiB, shrinking for big meshes so all
// stacks together reserve about 1 GiB of address space, but never below
// 1 MiB. (The interpreter does not recurse over instructions, only into
// nested computations, so 1 MiB is plenty; 1536 default-size stacks would
// reserve 12 GiB.)
int64_t DeviceThreadStackBytes(int64_t num_devices);

}  // namespace meshsplit
