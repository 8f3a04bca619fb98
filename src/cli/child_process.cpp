#include "cli/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "cli/command.h"

namespace gpuleak::cli {

namespace {

std::atomic<pid_t> g_child{-1};
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

void forward(int signal, siginfo_t* info, void*) {
  pid_t child = g_child.load();
  if (child <= 0) return;
  // Signals from the terminal go to the whole foreground process group, the
  // program included; only signals sent to gpuleak itself are passed on.
  if (info &&
      (info->si_code == SI_USER || info->si_code == SI_QUEUE || info->si_code == SI_TKILL)) {
    ::kill(child, signal);
  }
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& environment) {
  if (argv.empty()) throw UsageError("no program to run (give it after --)");
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    throw InputError(std::string("pipe: ") + std::strerror(errno));

  std::vector<char*> args, env;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : environment) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);

  struct sigaction action {};
  action.sa_sigaction = forward;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);

  pid_ = ::fork();
  if (pid_ < 0) throw InputError(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    ::close(report[0]);
    ::execvpe(args[0], args.data(), env.data());
    int error = errno;
    ssize_t ignored = ::write(report[1], &error, sizeof error);
    (void)ignored;
    ::_exit(127);
  }
  ::close(report[1]);
  int exec_error = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &exec_error, sizeof exec_error);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == sizeof exec_error) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    throw InputError("cannot run '" + argv[0] + "': " + std::strerror(exec_error));
  }
  g_child.store(pid_);
  for (int signal : kForwarded) ::sigaction(signal, &action, nullptr);
}

ChildProcess::~ChildProcess() {
  g_child.store(-1);
  for (int signal : kForwarded) ::signal(signal, SIG_DFL);
}

std::optional<int> ChildProcess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == pid_) {
    exited_ = WIFEXITED(status);
    if (WIFEXITED(status))
      status_ = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      status_ = 128 + WTERMSIG(status);
    else
      status_ = 1;
    g_child.store(-1);
  }
  return status_;
}

std::string describe_exit_status(int status) {
  if (status > 128 && status < 128 + 65) {
    int signal = status - 128;
    const char* name = sigabbrev_np(signal);
    return std::string("was killed by SIG") + (name ? name : std::to_string(signal).c_str());
  }
  return "exited with status " + std::to_string(status);
}

}  // namespace gpuleak::cli
