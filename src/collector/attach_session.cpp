// gpuleak_attach_start: the collector's side of `gpuleak attach` in a
// process that runs no Python (docs/attach.md, "CUDA programs without
// Python"). The injector loads this library with dlopen on a thread that
// waits in a system call, sets the GPULEAK_ATTACH_* variables with putenv
// first, and calls gpuleak_attach_start() there. It only starts a thread and
// returns: the heavy work (CUPTI's subscription, which loads libraries and
// calls into the driver) must not run on a thread stopped at a random point.
//
// The session thread starts recording as the driver's injection would
// (InitializeInjection: from now on, driver allocation calls through
// CUPTI; an interposer cannot start late), then speaks the handshake of
// python/gpuleak/_attach_agent.py through the control folder: started.json
// or failed.json, and stopped.json after it closed the trace when gpuleak
// asked (the file `stop`), was gone, or the bound passed.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include "collector/recorder.h"
#include "gpuleak/collector_api.h"

namespace gpuleak::collector {
namespace {

constexpr auto kWatchInterval = std::chrono::milliseconds(50);

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The start time of process `pid` in clock ticks since boot (/proc/PID/stat
// field 22), or "" when it is gone: with the pid, one process.
std::string start_ticks(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t close = text.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && (fields >> field); ++i) {
    if (i == 22) return field;
  }
  return "";
}

// Writes one handshake file whole (a rename), so gpuleak never reads half of it.
void write_handshake(const std::string& control, const std::string& name, const std::string& json) {
  std::string partial = control + "/" + name + ".partial";
  {
    std::ofstream out(partial);
    out << json;
    if (!out) return;
  }
  std::rename(partial.c_str(), (control + "/" + name).c_str());
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

void run_session() {
  std::string control = environment("GPULEAK_ATTACH_CONTROL");
  std::string gpuleak_pid = environment("GPULEAK_ATTACH_GPULEAK_PID");
  std::string gpuleak_ticks = environment("GPULEAK_ATTACH_GPULEAK_TICKS");
  double duration_s = std::atof(environment("GPULEAK_ATTACH_DURATION_S").c_str());
  InitializeInjection();
  if (!gpuleak_is_recording()) {
    write_handshake(control, "failed.json",
                    "{\"reason\": \"the collector could not start recording (it said why on the "
                    "program's stderr)\"}");
    return;
  }
  gpuleak_annotate("attach", ("{\"event\": \"begin\", \"cli_pid\": " +
                              (gpuleak_pid.empty() ? std::string("0") : gpuleak_pid) + "}")
                                 .c_str());
  gpuleak_flush();
  write_handshake(control, "started.json",
                  "{\"pid\": " + std::to_string(::getpid()) + ", \"driver_calls\": true}");
  auto started = std::chrono::steady_clock::now();
  const char* reason = nullptr;
  while (reason == nullptr) {
    std::this_thread::sleep_for(kWatchInterval);
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (exists(control + "/stop")) {
      reason = "asked";
    } else if (!gpuleak_pid.empty() && start_ticks(gpuleak_pid) != gpuleak_ticks) {
      reason = "gpuleak attach ended";
    } else if (duration_s > 0 && elapsed >= duration_s) {
      reason = "duration";  // also when gpuleak is alive but no longer asks (stopped, hung)
    }
  }
  gpuleak_annotate("attach",
                   (std::string("{\"event\": \"end\", \"reason\": \"") + reason + "\"}").c_str());
  gpuleak_stop_recording();
  write_handshake(control, "stopped.json",
                  std::string("{\"reason\": \"") + reason + "\", \"steps\": 0}");
}

}  // namespace
}  // namespace gpuleak::collector

extern "C" __attribute__((visibility("default"))) int gpuleak_attach_start(void) {
  try {
    // The session thread must never take the program's signals.
    sigset_t all;
    sigset_t previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    try {
      std::thread([] {
        try {
          gpuleak::collector::run_session();
        } catch (...) {
        }
      }).detach();
    } catch (...) {
      pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      return 0;
    }
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return 1;
  } catch (...) {
    return 0;
  }
}
