// `gpuleak lint PATH...`: static review of Python training code and
// notebooks for GPU-memory leak patterns (see docs/lint.md).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "command.h"
#include "lint/file_discovery.h"
#include "lint/lint.h"
#include "lint/lint_config.h"
#include "lint/output/lint_output.h"
#include "progress.h"
#include "version.h"

namespace gpuleak::cli {
namespace {

struct LintOptionsFromFlags {
  std::vector<std::string> paths;  // "-" reads one file from standard input
  std::string format = "text";
  std::string stdin_filename;  // the name "-" is reported under
  bool exit_zero = false;
  bool statistics = false;
  std::vector<std::string> select;
  std::vector<std::string> ignore;
  std::vector<std::string> exclude;
  std::string config;
  bool no_config = false;
  std::string color = "auto";
  std::string output;
  unsigned jobs = 0;
  bool list_rules = false;
};

bool use_color(const std::string& mode, bool to_stdout) {
  if (mode == "always") return true;
  if (mode == "never" || !to_stdout) return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && *no_color != '\0') return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::string_view(term) == "dumb") return false;
  return isatty(STDOUT_FILENO) == 1;
}

int list_rules(const LintOptionsFromFlags& o) {
  if (o.format == "json") {
    lint::write_rules_json(std::cout);
  } else {
    lint::write_rules_text(std::cout);
  }
  return kExitOk;
}

lint::LintConfig resolve_config(const LintOptionsFromFlags& o) {
  try {
    if (!o.config.empty()) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(o.config, ec)) {
        throw UsageError(fmt::format("--config {}: no such file", o.config));
      }
      return lint::load_config(o.config);
    }
    if (o.no_config) return {};
    auto found = lint::find_config(o.paths.empty() ? std::filesystem::path(".")
                                                   : std::filesystem::path(o.paths.front()));
    return found ? *found : lint::LintConfig{};
  } catch (const lint::ConfigError& e) {
    throw UsageError(e.what());
  }
}

// Lints every file on `jobs` threads (one Linter each); reports come back in
// the order of `files`. The calling thread draws the progress line.
std::vector<lint::FileReport> lint_all(const std::vector<std::filesystem::path>& files,
                                       const lint::LintOptions& options, unsigned jobs) {
  std::vector<lint::FileReport> reports(files.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  // `on_file` runs after each file on the thread that linted it; only the
  // single-threaded run uses it, to draw progress from that one thread.
  auto work = [&](auto on_file) {
    lint::Linter linter(options);
    for (std::size_t i = next++; i < files.size(); i = next++) {
      try {
        reports[i] = linter.lint_file(files[i]);
      } catch (const std::exception& e) {
        reports[i].path = files[i].string();
        reports[i].problem = lint::FileProblem{fmt::format("internal error: {}", e.what()), {}, 0};
      }
      on_file(++done);
    }
  };
  Progress progress("gpuleak lint", files.size(), Progress::Unit::kFiles);
  jobs = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(files.size())));
  std::vector<std::thread> workers;
  if (jobs == 1) {
    work([&](std::size_t n) { progress.update(n); });
  } else {
    for (unsigned j = 0; j < jobs; ++j) workers.emplace_back(work, [](std::size_t) {});
    while (done.load() < files.size()) {
      progress.update(done.load());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  for (auto& t : workers) t.join();
  progress.finish();
  return reports;
}

// Standard input, read whole (it is bounded like a file: a pipe that never
// ends is cut at the linter's size limit and refused).
lint::FileReport lint_stdin(const std::string& name, const lint::LintOptions& options) {
  std::string bytes;
  char buffer[1 << 16];
  std::size_t n;
  constexpr std::size_t kLimit = 64ull << 20;
  while ((n = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) {
    bytes.append(buffer, n);
    if (bytes.size() > kLimit) break;
  }
  lint::Linter linter(options);
  if (bytes.size() > kLimit) {
    lint::FileReport r;
    r.path = name;
    r.problem = lint::FileProblem{"larger than 64 MiB; not linted", {}, 0};
    return r;
  }
  if (std::ferror(stdin)) {
    lint::FileReport r;
    r.path = name;
    r.problem = lint::FileProblem{"cannot read standard input", {}, 0};
    return r;
  }
  if (name.size() > 6 && name.substr(name.size() - 6) == ".ipynb") {
    return linter.lint_notebook(name, bytes);
  }
  return linter.lint_python(name, bytes);
}

int run_lint(const LintOptionsFromFlags& o) {
  if (o.list_rules) return list_rules(o);
  if (o.paths.empty())
    throw UsageError("lint: no PATH given (try `gpuleak lint .`, or `-` for stdin)");
  if (o.statistics && o.format != "text") {
    throw UsageError("lint: --statistics prints a table of counts; it goes with --format text");
  }
  bool from_stdin = false;
  std::vector<std::string> paths;
  for (const auto& p : o.paths) {
    if (p == "-") {
      if (from_stdin) throw UsageError("lint: `-` (standard input) given twice");
      from_stdin = true;
    } else {
      paths.push_back(p);
    }
  }
  if (!o.stdin_filename.empty() && !from_stdin) {
    throw UsageError("lint: --stdin-filename names standard input; add `-` to the PATHs");
  }

  lint::LintConfig config = resolve_config(o);
  std::vector<std::string> select = o.select.empty() ? config.select : o.select;
  std::vector<std::string> ignore = config.ignore;
  ignore.insert(ignore.end(), o.ignore.begin(), o.ignore.end());
  std::vector<std::string> exclude = config.exclude;
  exclude.insert(exclude.end(), o.exclude.begin(), o.exclude.end());
  lint::LintOptions options;
  try {
    options.selection = lint::RuleSelection(select, ignore);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }

  std::ofstream file_out;
  if (!o.output.empty()) {
    file_out.open(o.output, std::ios::binary | std::ios::trunc);
    if (!file_out) throw InputError(fmt::format("cannot write {}", o.output));
  }
  std::ostream& out = o.output.empty() ? std::cout : file_out;

  auto started = std::chrono::steady_clock::now();
  lint::DiscoveredFiles found = lint::discover_files(paths, exclude);
  for (const auto& m : found.missing) {
    std::fprintf(stderr, "gpuleak: %s: no such file or folder\n", m.c_str());
  }
  for (const auto& p : found.problems) std::fprintf(stderr, "gpuleak: %s\n", p.c_str());

  unsigned jobs = o.jobs > 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  lint::LintRun run;
  run.reports = lint_all(found.files, options, jobs);
  if (from_stdin) {
    run.reports.push_back(lint_stdin(o.stdin_filename.empty() ? "-" : o.stdin_filename, options));
  }
  run.missing = found.missing;
  run.problems = found.problems;
  for (const auto& r : run.reports) run.bytes += r.bytes;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  for (const auto& r : run.reports) {
    if (r.problem) {
      std::string where = r.problem->position.line > 0
                              ? lint::format_location(r.path, r.problem->cell, r.problem->position)
                              : r.path;
      std::fprintf(stderr, "gpuleak: %s: %s; not linted\n", where.c_str(),
                   r.problem->message.c_str());
    }
    for (const auto& u : r.unparsed) {
      std::string where = lint::format_location(r.path, u.cell, u.position);
      std::fprintf(stderr, "gpuleak: %s: %s\n", where.c_str(), u.message.c_str());
    }
  }

  if (o.format == "json") {
    lint::write_json(out, run, kVersion);
  } else if (o.format == "sarif") {
    lint::write_sarif(out, run, kVersion);
  } else if (o.format == "github") {
    lint::write_github(out, run);
  } else if (o.statistics) {
    lint::write_statistics(out, run);
  } else if (!(run.reports.empty() && !found.missing.empty())) {
    // (Nothing linted because nothing exists: the errors above say it all.)
    lint::write_text(out, run, use_color(o.color, o.output.empty()));
  }
  out.flush();
  if (!out)
    throw InputError(fmt::format("cannot write {}", o.output.empty() ? "to stdout" : o.output));

  // 2 (a PATH does not exist) before 3 (something could not be linted or
  // listed) before 1 (findings); --exit-zero turns 1 and 3 into 0.
  if (!found.missing.empty()) return kExitUsage;
  int status = kExitOk;
  if (!found.problems.empty() || run.files_not_linted() > 0) {
    status = kExitInput;
  } else if (run.finding_count() > 0) {
    status = kExitFindings;
  }
  return o.exit_zero ? kExitOk : status;
}

}  // namespace

void add_lint_command(CLI::App& app, CommandAction& action) {
  auto o = std::make_shared<LintOptionsFromFlags>();
  auto* sub = app.add_subcommand(
      "lint", "Review Python training code and notebooks for GPU-memory leak patterns");
  sub->add_option("paths", o->paths,
                  "Files and folders to lint (.py and .ipynb, recursively); - for standard input");
  sub->add_option("--format,--output-format", o->format,
                  "Output: text (default), json, sarif or github (workflow annotations)")
      ->check(CLI::IsMember({"text", "json", "sarif", "github"}));
  sub->add_flag("--exit-zero", o->exit_zero,
                "Exit 0 even with findings or files that could not be linted (usage errors still "
                "exit 2)");
  sub->add_flag("--statistics", o->statistics,
                "Print one line per rule with its number of findings instead of the findings");
  sub->add_option("--stdin-filename", o->stdin_filename,
                  "The name to report standard input (`-`) under; .ipynb reads a notebook");
  sub->add_option("--select", o->select, "Run only these rules (ids, prefixes like GL1, or names)")
      ->delimiter(',')
      ->allow_extra_args(false);
  sub->add_option("--ignore", o->ignore, "Skip these rules (added to the configuration's ignore)")
      ->delimiter(',')
      ->allow_extra_args(false);
  sub->add_option("--exclude", o->exclude, "Skip files and folders matching these globs")
      ->delimiter(',')
      ->allow_extra_args(false);
  sub->add_option("--config", o->config, "Read [tool.gpuleak] from this pyproject.toml");
  sub->add_flag("--no-config", o->no_config, "Ignore pyproject.toml files");
  sub->add_option("--color", o->color, "Colour in text output: auto (default), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  sub->add_option("-o,--output", o->output, "Write the report to this file instead of stdout");
  sub->add_option("-j,--jobs", o->jobs, "Files linted in parallel (default: one per CPU core)")
      ->check(CLI::Range(1u, 1024u));
  sub->add_flag("--list-rules", o->list_rules, "List the rules and exit");
  sub->callback([&action, o] { action = [o] { return run_lint(*o); }; });
}

}  // namespace gpuleak::cli
