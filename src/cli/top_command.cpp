// `gpuleak top`: a live view of GPU memory and host RSS per process, with
// trends, leak flags and time until full. Redraws in place on a terminal,
// prints plain blocks in a pipe, one JSON object per sample with --json.
// On a terminal (stdin and stdout) it also takes keys: sort, filter, tree,
// select, attach to the selected process, end a selected orphan, quit.
#include <fmt/format.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "command.h"
#include "monitor/device_files.h"
#include "monitor/kill_policy.h"
#include "monitor/process_ender.h"
#include "monitor/process_tree.h"
#include "monitor/sample_history.h"
#include "monitor/sample_json.h"
#include "monitor/sample_reader.h"
#include "monitor/top_text.h"
#include "quantity/units.h"
#include "raw_terminal.h"
#include "report/json_text.h"
#include "terminal_signals.h"

namespace gpuleak::cli {

namespace {

struct TopFlags {
  double interval_s = 1.0;
  std::size_t count = 0;
  bool json = false;
  double window_s = 300;
  std::uint64_t min_growth_bytes_per_s = std::uint64_t{16} * 1024;
  std::vector<int> pids;
  bool no_nvml = false;
  std::string device_files;
  // The bound of the `gpuleak attach` that the `a` key runs (its own
  // defaults when unset: 60 s; with steps alone, at most an hour).
  std::optional<double> attach_duration_s;
  std::optional<std::uint64_t> attach_steps;
};

volatile std::sig_atomic_t g_stop_requested = 0;
volatile std::sig_atomic_t g_suspend_requested = 0;

void request_stop(int) { g_stop_requested = 1; }
void request_suspend(int) { g_suspend_requested = 1; }

// SIGINT/SIGTERM end the loop after the current sample instead of killing
// the process mid-line (a JSON or text stream keeps whole lines; with keys
// on a terminal, TerminalSignals takes SIGTERM over); no SA_RESTART, so a sleep wakes up at once.
void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // A closed pipe (`gpuleak top | head`) shows up as a failed write instead.
  signal(SIGPIPE, SIG_IGN);
}

void sleep_until(std::chrono::steady_clock::time_point deadline) {
  while (!g_stop_requested) {
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
    poll(nullptr, 0, static_cast<int>(ms));  // returns early on a signal
  }
}

std::size_t terminal_width() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 0;
}

// Redraws in place: home, each line cleared to its end, the rest cleared.
std::string in_place(const std::string& text) {
  std::string out = "\x1b[H";
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    out.append(text, at, end - at);
    out += "\x1b[K\n";
    at = end + 1;
  }
  out += "\x1b[J";
  return out;
}

bool write_out(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) return false;
  return std::fflush(stdout) == 0;
}

// The keys of the interactive view and what they change. Owns nothing but
// its own state; reads the last sample the loop took.
class TopKeys {
 public:
  enum class Outcome { kNothing, kRedraw, kQuit, kAttach };

  monitor::TopView view;

  Outcome handle(const Key& key, const monitor::Sample& sample, const monitor::RawSample& raw) {
    if (mode_ == Mode::kFilter) return edit_filter(key);
    if (mode_ == Mode::kConfirmEnd) return confirm_end(key);
    if (key.kind == KeyKind::kUp || key.kind == KeyKind::kDown) {
      move_selection(sample, key.kind == KeyKind::kUp ? -1 : 1);
      return Outcome::kRedraw;
    }
    if (key.kind != KeyKind::kChar) return Outcome::kNothing;
    message_.clear();
    switch (key.ch) {
      case 'q':
      case 'Q':
        return Outcome::kQuit;
      case 's':
        view.sort = monitor::next_top_sort(view.sort);
        return Outcome::kRedraw;
      case 't':
        view.tree = !view.tree;
        return Outcome::kRedraw;
      case '/':
      case 'f':
        mode_ = Mode::kFilter;
        edited_ = view.filter;
        return Outcome::kRedraw;
      case 'a':
        if (view.selected_pid <= 0) {
          message_ = "no process selected (up/down selects one)";
          return Outcome::kRedraw;
        }
        return Outcome::kAttach;
      case 'k':
        ask_end(sample, raw);
        return Outcome::kRedraw;
      default:
        return Outcome::kNothing;
    }
  }

  // Keeps the selection on a shown process (the first one when it left).
  void settle_selection(const monitor::Sample& sample) {
    auto rows = monitor::arrange_top_rows(sample, view);
    for (const auto& row : rows) {
      if (row.process->pid == view.selected_pid) return;
    }
    view.selected_pid = rows.empty() ? 0 : rows.front().process->pid;
  }

  void set_message(std::string text) { message_ = std::move(text); }

  // The lines under the table: a message, then the prompt or the key help.
  std::string footer() const {
    std::string out;
    if (!message_.empty()) out += message_ + "\n";
    if (mode_ == Mode::kFilter) {
      out += "filter: " + edited_ + "_   (Enter applies, Esc clears)";
    } else if (mode_ == Mode::kConfirmEnd) {
      // The question first: a long command line is cut at the terminal's width.
      out += fmt::format("End orphan PID {}? y/n (SIGTERM, then SIGKILL; {})", end_target_.pid,
                         end_target_.description);
    } else {
      out += fmt::format(
          "q quit  s sort: {}  / filter{}  t tree{}  up/down select  a attach  k end orphan",
          monitor::top_sort_name(view.sort),
          view.filter.empty() ? "" : fmt::format(" \"{}\"", view.filter), view.tree ? ": on" : "");
    }
    return out;
  }

 private:
  enum class Mode { kNormal, kFilter, kConfirmEnd };

  Outcome edit_filter(const Key& key) {
    switch (key.kind) {
      case KeyKind::kEnter:
        view.filter = edited_;
        mode_ = Mode::kNormal;
        return Outcome::kRedraw;
      case KeyKind::kEscape:
        view.filter.clear();
        edited_.clear();
        mode_ = Mode::kNormal;
        return Outcome::kRedraw;
      case KeyKind::kBackspace:
        if (!edited_.empty()) edited_.pop_back();
        return Outcome::kRedraw;
      case KeyKind::kChar:
        if (static_cast<unsigned char>(key.ch) >= 0x20) edited_ += key.ch;
        return Outcome::kRedraw;
      default:
        return Outcome::kNothing;
    }
  }

  void move_selection(const monitor::Sample& sample, int step) {
    auto rows = monitor::arrange_top_rows(sample, view);
    if (rows.empty()) return;
    std::size_t at = 0;
    bool found = false;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].process->pid == view.selected_pid) {
        at = i;
        found = true;
      }
    }
    if (found && step < 0 && at > 0) --at;
    if (found && step > 0 && at + 1 < rows.size()) ++at;
    view.selected_pid = rows[at].process->pid;
  }

  // The doctor's notion of an orphan and its kill policy decide, as for
  // `doctor --kill-orphans`; then a y/n question.
  void ask_end(const monitor::Sample& sample, const monitor::RawSample& raw) {
    const monitor::ProcessView* selected = nullptr;
    for (const auto& process : sample.processes) {
      if (process.pid == view.selected_pid) selected = &process;
    }
    if (selected == nullptr) {
      message_ = "no process selected (up/down selects one)";
      return;
    }
    if (!selected->visible || !selected->orphan.orphaned) {
      message_ = fmt::format("PID {} is not an orphan: k ends only orphans (see gpuleak doctor)",
                             selected->pid);
      return;
    }
    monitor::ProcessTree tree(raw.table);
    monitor::KillDecision decision =
        monitor::decide_kill(selected->info, true, tree.is_namespace_init(selected->pid),
                             monitor::KillContext::for_this_process(false), selected->user);
    if (!decision.allowed) {
      message_ = fmt::format("PID {} is not ended: {}", selected->pid, decision.reason);
      return;
    }
    end_target_.pid = selected->pid;
    end_target_.start_ticks = selected->info.start_ticks;
    end_target_.description = selected->info.command_line() + ", user " + selected->user;
    mode_ = Mode::kConfirmEnd;
  }

  Outcome confirm_end(const Key& key) {
    mode_ = Mode::kNormal;
    if (key.kind != KeyKind::kChar || (key.ch != 'y' && key.ch != 'Y')) {
      message_ = fmt::format("PID {} not ended", end_target_.pid);
      return Outcome::kRedraw;
    }
    monitor::EndOutcome outcome =
        monitor::end_process(end_target_, kEndGraceSeconds, [](const std::string&) {});
    message_ = outcome.message;
    return Outcome::kRedraw;
  }

  static constexpr double kEndGraceSeconds = 5.0;
  Mode mode_ = Mode::kNormal;
  std::string edited_;
  std::string message_;
  monitor::EndTarget end_target_;
};

// The command line of the `gpuleak attach` that the `a` key runs.
std::vector<std::string> attach_command(int pid, const TopFlags& flags) {
  std::vector<std::string> words = {"gpuleak", "attach", std::to_string(pid)};
  if (flags.attach_duration_s) {
    words.push_back("--duration");
    words.push_back(fmt::format("{}", *flags.attach_duration_s));
  }
  if (flags.attach_steps) {
    words.push_back("--steps");
    words.push_back(std::to_string(*flags.attach_steps));
  }
  return words;
}

// Runs `gpuleak attach PID` on the normal screen, below what the shell
// showed, and waits for it. Ctrl-C belongs to the child meanwhile, and
// SIGTERM or SIGHUP that end top reach it too. Its report stays in view
// until a key is pressed. Returns a line saying how it ended.
std::string run_attach(RawTerminal& terminal, int pid, const TopFlags& flags) {
  terminal.suspend();
  std::vector<std::string> words = attach_command(pid, flags);
  std::string shown;
  for (const std::string& word : words) shown += (shown.empty() ? "" : " ") + word;
  std::fprintf(stdout, "\ngpuleak top: running %s\n", shown.c_str());
  std::fflush(stdout);
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &previous);
  std::vector<char*> argv;
  argv.reserve(words.size() + 1);
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_t child = fork();
  if (child == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  std::string result;
  if (child < 0) {
    result = std::string("cannot start gpuleak attach: ") + std::strerror(errno);
  } else {
    forward_ending_signals_to(child);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    forward_ending_signals_to(0);
    result = WIFEXITED(status)
                 ? fmt::format("gpuleak attach {} exited with status {}", pid, WEXITSTATUS(status))
                 : fmt::format("gpuleak attach {} ended by signal {}", pid,
                               WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  }
  sigaction(SIGINT, &previous, nullptr);
  std::fprintf(stdout, "\n%s; press a key to return to top\n", result.c_str());
  std::fflush(stdout);
  terminal.keys_on_normal_screen();
  while (!g_stop_requested && terminal.read_key(250).kind == KeyKind::kNone) {
  }
  terminal.resume();
  write_out("\x1b[2J");
  return result;
}

int run_top(const TopFlags& flags) {
  monitor::DeviceFilePattern pattern =
      monitor::DeviceFilePattern::from_flag_or_environment(flags.device_files);
  if (std::string notice = pattern.change_notice(); !notice.empty())
    std::fprintf(stderr, "gpuleak top: %s\n", notice.c_str());
  monitor::SampleReader source(pattern, !flags.no_nvml);
  monitor::SampleHistory::Options options;
  options.trend.window_s = flags.window_s;
  options.trend.min_growth_bytes_per_s = static_cast<double>(flags.min_growth_bytes_per_s);
  options.watch_pids = std::set<int>(flags.pids.begin(), flags.pids.end());
  monitor::SampleHistory history(options);

  const bool terminal = !flags.json && isatty(STDOUT_FILENO) == 1;
  monitor::TopTextOptions text_options;
  text_options.interval_s = flags.interval_s;
  text_options.window_s = flags.window_s;
  if (!terminal && !flags.json && !source.nvml_status().available) {
    // In a pipe the note would repeat every block; say it once on stderr too.
    std::fprintf(stderr, "gpuleak top: %s\n", source.nvml_status().message.c_str());
  }

  install_stop_handlers();
  // Keys only when a person is at a terminal on both ends. The signal
  // handlers outlive the raw mode (declared first, destroyed last).
  std::unique_ptr<TerminalSignals> terminal_signals;
  std::unique_ptr<RawTerminal> keys_terminal;
  TopKeys keys;
  if (terminal && isatty(STDIN_FILENO) == 1) {
    std::set_terminate([] {
      restore_terminal_now();
      std::abort();
    });
    struct sigaction stop {};
    stop.sa_handler = request_stop;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGQUIT, &stop, nullptr);
    struct sigaction suspend {};
    suspend.sa_handler = request_suspend;
    sigemptyset(&suspend.sa_mask);
    sigaction(SIGTSTP, &suspend, nullptr);
    // SIGTERM and SIGHUP now restore the terminal and end top at once, with
    // their status (a crash too): nothing waits for the sample in progress.
    terminal_signals = std::make_unique<TerminalSignals>();
    keys_terminal = std::make_unique<RawTerminal>(STDIN_FILENO);
  }
  monitor::RawSample last_raw;
  monitor::Sample last_sample;
  auto screen = [&] {
    text_options.max_width = terminal_width();
    keys.settle_selection(last_sample);
    std::string text = monitor::render_top_text(last_sample, text_options, &keys.view);
    std::string footer = keys.footer();
    std::size_t at = 0;
    while (at <= footer.size()) {
      std::size_t end = footer.find('\n', at);
      if (end == std::string::npos) end = footer.size();
      std::string part = footer.substr(at, end - at);
      if (text_options.max_width > 0 && part.size() > text_options.max_width)
        part.resize(text_options.max_width);
      text += "\n" + part;
      at = end + 1;
    }
    return in_place(text + "\n");
  };
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(flags.interval_s));
  auto next = std::chrono::steady_clock::now();
  if (terminal) write_out("\x1b[2J");
  for (std::size_t taken = 0; !g_stop_requested && (flags.count == 0 || taken < flags.count);
       ++taken) {
    monitor::RawSample raw = source.take_periodic(options.watch_pids);
    monitor::Sample sample = history.add(raw);
    std::string text;
    if (keys_terminal) {
      last_sample = std::move(sample);
      last_raw = std::move(raw);
      text = screen();
    } else if (flags.json) {
      text = report::json_text(monitor::sample_to_json(sample)) + "\n";
    } else if (terminal) {
      text_options.max_width = terminal_width();
      text = in_place(monitor::render_top_text(sample, text_options));
    } else {
      text = monitor::render_top_text(sample, text_options) + "\n";
    }
    if (!write_out(text)) {
      if (errno == EPIPE) return kExitOk;  // the reader went away
      throw InputError(std::string("cannot write to stdout: ") + std::strerror(errno));
    }
    if (flags.count != 0 && taken + 1 == flags.count) break;
    next += interval;
    // Never bunch samples up after a slow one; keep the rhythm from now on.
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now();
    if (!keys_terminal) {
      sleep_until(next);
      continue;
    }
    while (!g_stop_requested) {
      if (g_suspend_requested) {  // Ctrl-Z: the shell gets its terminal back
        g_suspend_requested = 0;
        keys_terminal->suspend();
        signal(SIGTSTP, SIG_DFL);
        raise(SIGTSTP);
        struct sigaction suspend {};
        suspend.sa_handler = request_suspend;
        sigemptyset(&suspend.sa_mask);
        sigaction(SIGTSTP, &suspend, nullptr);
        keys_terminal->resume();
        write_out("\x1b[2J" + screen());
      }
      auto left = next - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) break;
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
      Key key = keys_terminal->read_key(static_cast<int>(ms));
      if (key.kind == KeyKind::kNone) continue;
      TopKeys::Outcome outcome = keys.handle(key, last_sample, last_raw);
      if (outcome == TopKeys::Outcome::kQuit) return kExitOk;
      if (outcome == TopKeys::Outcome::kAttach) {
        keys.set_message(run_attach(*keys_terminal, keys.view.selected_pid, flags));
      }
      if (outcome != TopKeys::Outcome::kNothing) write_out(screen());
    }
  }
  if (keys_terminal) write_out("\n");
  return kExitOk;
}

}  // namespace

void add_top_command(CLI::App& app, CommandAction& action) {
  auto flags = std::make_shared<TopFlags>();
  auto* sub = app.add_subcommand(
      "top", "Live view of GPU memory and host RSS per process, with trends and leak flags");
  sub->add_option("--interval", flags->interval_s, "Seconds between samples (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--count", flags->count,
                  "Stop after this many samples (default: run until Ctrl-C)");
  sub->add_flag("--json", flags->json, "Print one JSON object per sample instead of the table");
  sub->add_option("--window", flags->window_s,
                  "Seconds of history the trend test looks at (default 300)")
      ->check(CLI::Range(2.0, 86400.0));
  sub->add_option("--min-growth", flags->min_growth_bytes_per_s,
                  "Growth per second below which nothing is called a leak (default 16KiB)")
      ->transform(CLI::AsSizeValue(false));
  sub->add_option("--pid", flags->pids, "Also show this process (repeatable), GPU or not")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--no-nvml", flags->no_nvml, "Do not load NVML; show /proc information only");
  sub->add_option("--device-files", flags->device_files,
                  "Glob for GPU device files (default /dev/nvidia*, or $GPULEAK_DEVICE_FILE_GLOB)")
      ->group("");  // hidden: for tests and unusual device layouts
  sub->add_option("--attach-duration", flags->attach_duration_s,
                  "Seconds the `a` key's gpuleak attach records (default 60)")
      ->check(CLI::Range(0.1, 7.0 * 24 * 3600));
  sub->add_option("--attach-steps", flags->attach_steps,
                  "Steps the `a` key's gpuleak attach records (alone: at most 3600 s)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  sub->callback([&action, flags] { action = [flags] { return run_top(*flags); }; });
}

}  // namespace gpuleak::cli
