#include "collector/thread_buffers.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace gpuleak::collector {

namespace {

// The calling thread's buffer. A plain pointer (no destructor): glibc runs
// thread_local destructors before atexit handlers, and the collector still
// records during exit (the exit record, frees in static destructors).
thread_local ThreadBuffer* t_buffer = nullptr;

// Retires a thread's buffer when the thread ends. Thread-specific data
// destructors run for threads that end, but not for the main thread when
// the process exits, so the main thread's buffer stays valid to the end.
pthread_key_t g_exit_key;
pthread_once_t g_exit_key_once = PTHREAD_ONCE_INIT;
ThreadBuffers* g_owner = nullptr;

void on_thread_exit(void* value) {
  auto* buffer = static_cast<ThreadBuffer*>(value);
  if (t_buffer == buffer) t_buffer = nullptr;
  if (g_owner && buffer) g_owner->retire(buffer);
}

void make_exit_key() { pthread_key_create(&g_exit_key, on_thread_exit); }

}  // namespace

ThreadBuffer& ThreadBuffers::current(bool* is_new) {
  if (t_buffer) {
    *is_new = false;
    return *t_buffer;
  }
  pthread_once(&g_exit_key_once, make_exit_key);
  g_owner = this;
  auto* buffer = new ThreadBuffer;
  buffer->thread_id = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  buffer->bytes.reserve(kInitialBytes);
  {
    std::lock_guard<std::mutex> lock(registry_mutex_);
    buffers_.push_back(buffer);
  }
  t_buffer = buffer;
  pthread_setspecific(g_exit_key, buffer);
  *is_new = true;
  return *buffer;
}

void ThreadBuffers::prepare_spare(ThreadBuffer& buffer) {
  std::string& spare = buffer.spare;
  spare.clear();
  // Twice the recent peak (which decays), within the wake-up threshold's
  // reach; a thread that records little keeps its small buffer.
  std::size_t wanted = std::min(buffer.largest_drain * 2, kWakeWriterBytes * 2);
  if (spare.capacity() > kWakeWriterBytes * 2 || spare.capacity() > wanted * 4 + kInitialBytes) {
    spare.shrink_to_fit();
  }
  if (spare.capacity() < wanted) {
    spare.resize(wanted);  // writes every page now, on the writer thread
    spare.clear();         // keeps the capacity
  }
}

void ThreadBuffers::retire(ThreadBuffer* buffer) {
  std::lock_guard<SpinLock> lock(buffer->lock);
  buffer->retired = true;
}

}  // namespace gpuleak::collector
