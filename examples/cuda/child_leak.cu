// Leak in two processes: the parent forks before it touches CUDA; the child
// creates its own context and leaks 2 MiB; the parent leaks 1 MiB. Each
// process gets its own trace.
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static void child_work() {
  void* buffer = nullptr;
  CHECK(cudaMalloc(&buffer, 2 << 20));  // LEAK 1 x 2097152 child
  CHECK(cudaMemset(buffer, 1, 2 << 20));
  CHECK(cudaDeviceSynchronize());
}

static void parent_work() {
  void* buffer = nullptr;
  CHECK(cudaMalloc(&buffer, 1 << 20));  // LEAK 1 x 1048576 parent
}

int main() {
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    child_work();
    std::printf("child_leak: child %d done\n", static_cast<int>(getpid()));
    return 0;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  parent_work();
  std::printf("child_leak: parent done, child exited with %d\n", WEXITSTATUS(status));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}
