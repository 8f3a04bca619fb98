#include "support/process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace gpuleak::testing {

namespace {

std::vector<std::string> child_environment(const ProcessOptions& options) {
  std::map<std::string, std::string> values;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    auto eq = entry.find('=');
    if (eq != std::string::npos) values[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& key : options.unset_env) values.erase(key);
  for (const auto& entry : options.set_env) {
    auto eq = entry.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("set_env needs KEY=VALUE: " + entry);
    values[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : values) out.push_back(k + "=" + v);
  return out;
}

}  // namespace

std::vector<std::string> ProcessResult::err_lines() const {
  std::vector<std::string> lines;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

std::string ProcessResult::describe() const {
  std::string how = timed_out ? "timed out"
                    : signal  ? "signal " + std::to_string(signal)
                              : "exit " + std::to_string(exit_code);
  return how + "\n--- stderr ---\n" + err + "--- stdout (first 2000 bytes) ---\n" +
         out.substr(0, 2000);
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  std::vector<std::string> env = child_environment(options);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    if (!options.working_dir.empty() && ::chdir(options.working_dir.c_str()) != 0) ::_exit(126);
    ::execve(args[0], args.data(), envp.data());
    std::fprintf(stderr, "run_process: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  ProcessResult result;
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::string pending_line;
  bool out_open = true, err_open = true;
  int status = 0;
  bool reaped = false;
  struct rusage usage {};
  while (out_open || err_open || !reaped) {
    if (!reaped) {
      pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
      if (done == pid) {
        reaped = true;
        result.max_rss_kib = usage.ru_maxrss;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      if (reaped) break;  // something it started still holds the pipes
      if (!result.timed_out) ::kill(pid, SIGKILL);
      result.timed_out = true;
    }
    if (!reaped && options.while_running) options.while_running(pid);
    struct pollfd fds[2] = {{out_open ? out_pipe[0] : -1, POLLIN, 0},
                            {err_open ? err_pipe[0] : -1, POLLIN, 0}};
    if (!out_open && !err_open) {
      // Both pipes closed (the child may have closed them): just wait for it.
      ::usleep(20000);
      continue;
    }
    int ready = ::poll(fds, 2, 20);
    if (ready < 0 && errno != EINTR) break;
    char buffer[65536];
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      if (i == 0) {
        result.out.append(buffer, static_cast<std::size_t>(n));
      } else {
        result.err.append(buffer, static_cast<std::size_t>(n));
        pending_line.append(buffer, static_cast<std::size_t>(n));
        std::size_t newline;
        while ((newline = pending_line.find('\n')) != std::string::npos) {
          if (options.on_stderr_line) options.on_stderr_line(pending_line.substr(0, newline));
          pending_line.erase(0, newline + 1);
        }
      }
    }
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  if (!pending_line.empty() && options.on_stderr_line) options.on_stderr_line(pending_line);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace gpuleak::testing
