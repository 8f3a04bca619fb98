#include "collector/thread_buffers.h"

#include <sys/syscall.h>
#include <unistd.h>

namespace gpuleak::collector {

namespace {

// Retires the thread's buffer when the thread exits.
struct ThreadExitHook {
  ThreadBuffers* owner = nullptr;
  ThreadBuffer* buffer = nullptr;
  ~ThreadExitHook() {
    if (owner && buffer) owner->retire(buffer);
  }
};

thread_local ThreadExitHook t_hook;

}  // namespace

ThreadBuffer& ThreadBuffers::current(bool* is_new) {
  if (t_hook.buffer) {
    *is_new = false;
    return *t_hook.buffer;
  }
  auto* buffer = new ThreadBuffer;
  buffer->thread_id = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  buffer->bytes.reserve(64 * 1024);
  {
    std::lock_guard<std::mutex> lock(registry_mutex_);
    buffers_.push_back(buffer);
  }
  t_hook.owner = this;
  t_hook.buffer = buffer;
  *is_new = true;
  return *buffer;
}

void ThreadBuffers::retire(ThreadBuffer* buffer) {
  std::lock_guard<std::mutex> lock(buffer->mutex);
  buffer->retired = true;
}

}  // namespace gpuleak::collector
