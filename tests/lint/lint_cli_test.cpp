// `gpuleak lint` run as a real child process on real files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "child_process.h"
#include "lint/lint.h"
#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

using testing::run_child;
using testing::ScratchFolder;

const std::string kBinary = std::string(GPULEAK_BINARY_DIR) + "/gpuleak";

const char* kLeaky =
    "import torch\n"
    "def train(model, loader, opt, crit):\n"
    "    total = 0\n"
    "    for x, y in loader:\n"
    "        opt.zero_grad()\n"
    "        loss = crit(model(x), y)\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        total += loss\n"
    "        torch.cuda.empty_cache()\n";

const char* kClean =
    "import torch\n"
    "def train(model, loader, opt, crit):\n"
    "    total = 0\n"
    "    for x, y in loader:\n"
    "        opt.zero_grad()\n"
    "        loss = crit(model(x), y)\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        total += loss.item()\n";

testing::ChildResult lint(std::vector<std::string> args, const std::string& cwd = {},
                          const std::string& input = {}) {
  args.insert(args.begin(), {kBinary, "lint"});
  return run_child(args, cwd, input);
}

std::size_t lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

TEST(lint_cli, exits_1_with_findings_and_0_without) {
  ScratchFolder dir("cli-exit");
  auto leaky = dir.write("leaky.py", kLeaky);
  auto clean = dir.write("clean.py", kClean);
  auto r = lint({"--no-config", leaky.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("leaky.py:9:9: error GL101"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GL502"), std::string::npos) << r.out;
  auto ok = lint({"--no-config", clean.string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("No findings in 1 file."), std::string::npos) << ok.out;
  EXPECT_TRUE(ok.err.empty()) << ok.err;
}

TEST(lint_cli, walks_a_folder_and_lints_notebooks) {
  ScratchFolder dir("cli-folder");
  dir.write("pkg/leaky.py", kLeaky);
  dir.write("pkg/clean.py", kClean);
  nlohmann::json nb = {{"cells", {{{"cell_type", "code"}, {"source", kLeaky}}}},
                       {"metadata", nlohmann::json::object()},
                       {"nbformat", 4}};
  dir.write("nb/train.ipynb", nb.dump());
  auto r = lint({"--no-config", "--format", "json", dir.path().string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["summary"]["files"], 3);
  bool notebook_finding = false;
  for (const auto& f : doc["findings"]) {
    if (f["path"].get<std::string>().find("train.ipynb") != std::string::npos &&
        f["rule"] == "GL101") {
      notebook_finding = true;
      EXPECT_EQ(f["cell"], 1);
      EXPECT_EQ(f["line"], 9);
    }
  }
  EXPECT_TRUE(notebook_finding);
}

TEST(lint_cli, unknown_flag_is_a_usage_error_in_one_line) {
  auto r = lint({"--no-such-flag", "x.py"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
  EXPECT_LE(lines(r.err), 2u) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(lint_cli, bad_format_and_unknown_rule_are_usage_errors) {
  ScratchFolder dir("cli-usage");
  auto f = dir.write("a.py", kClean);
  auto bad_format = lint({"--format", "xml", f.string()});
  EXPECT_EQ(bad_format.exit_code, 2);
  auto bad_rule = lint({"--no-config", "--select", "GL999", f.string()});
  EXPECT_EQ(bad_rule.exit_code, 2);
  EXPECT_NE(bad_rule.err.find("unknown rule 'GL999'"), std::string::npos) << bad_rule.err;
  auto nothing = lint({});
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_NE(nothing.err.find("no PATH"), std::string::npos) << nothing.err;
}

TEST(lint_cli, missing_path_is_reported_and_the_others_still_linted) {
  ScratchFolder dir("cli-missing");
  auto leaky = dir.write("leaky.py", kLeaky);
  auto r = lint({"--no-config", (dir.path() / "absent.py").string(), leaky.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("absent.py: no such file or folder"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("GL101"), std::string::npos) << r.out;
}

TEST(lint_cli, binary_and_broken_files_get_one_clear_line_and_the_others_are_linted) {
  ScratchFolder dir("cli-broken");
  dir.write("a_binary.py", std::string("\x7f"
                                       "ELF\0\0\0garbage",
                                       14));
  dir.write("b_syntax.py", "import torch\n\ndef f(:\n    pass\n");
  dir.write("c_latin.py", "x = '\xe9'\n");
  dir.write("d_leaky.py", kLeaky);
  auto r = lint({"--no-config", dir.path().string()});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("a_binary.py: binary file (NUL byte at offset 4)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("b_syntax.py:3:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot parse as Python 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("c_latin.py: not UTF-8 text"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 3u) << r.err;
  EXPECT_NE(r.out.find("d_leaky.py:9:9: error GL101"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 files could not be linted"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos);
}

TEST(lint_cli, unreadable_file_is_reported_and_others_linted) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  ScratchFolder dir("cli-unreadable");
  auto secret = dir.write("secret.py", kLeaky);
  auto leaky = dir.write("leaky.py", kLeaky);
  chmod(secret.c_str(), 0);
  auto r = lint({"--no-config", secret.string(), leaky.string()});
  chmod(secret.c_str(), 0600);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("secret.py: cannot read"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("leaky.py:9:9"), std::string::npos);
}

TEST(lint_cli, pipes_and_devices_are_refused_without_blocking) {
  ScratchFolder dir("cli-fifo");
  auto fifo = dir.path() / "named_pipe.py";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto leaky = dir.write("leaky.py", kLeaky);
  auto r = lint({"--no-config", fifo.string(), "/dev/zero", leaky.string()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("named_pipe.py: not a regular file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/dev/zero: not a regular file"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("leaky.py:9:9"), std::string::npos) << r.out;
}

TEST(lint_cli, select_and_ignore_flags_choose_rules) {
  ScratchFolder dir("cli-select");
  auto f = dir.write("leaky.py", kLeaky);
  auto only = lint({"--no-config", "--select", "GL5", "--format", "json", f.string()});
  auto doc = nlohmann::json::parse(only.out);
  ASSERT_EQ(doc["findings"].size(), 1u);
  EXPECT_EQ(doc["findings"][0]["rule"], "GL502");
  auto ignored = lint({"--no-config", "--ignore", "GL101,GL502", f.string()});
  EXPECT_EQ(ignored.exit_code, 0) << ignored.out;
}

TEST(lint_cli, pyproject_configuration_is_found_and_applied) {
  ScratchFolder dir("cli-config");
  dir.write("pyproject.toml", "[tool.gpuleak]\nignore = [\"GL502\"]\nexclude = [\"vendored\"]\n");
  dir.write("src/leaky.py", kLeaky);
  dir.write("vendored/other.py", kLeaky);
  auto r = lint({"--format", "json", "."}, dir.path().string());
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["summary"]["files"], 1) << "the excluded folder is linted";
  ASSERT_EQ(doc["findings"].size(), 1u) << r.out;
  EXPECT_EQ(doc["findings"][0]["rule"], "GL101");
  // --select on the command line replaces the configured selection, and the
  // configured ignore still applies.
  auto r2 = lint({"--select", "GL5", "src"}, dir.path().string());
  EXPECT_EQ(r2.exit_code, 0) << r2.out;
}

TEST(lint_cli, broken_pyproject_is_a_usage_error_naming_the_line) {
  ScratchFolder dir("cli-bad-config");
  dir.write("pyproject.toml", "[tool.gpuleak]\nselect = [\"GL1\"\n");
  dir.write("a.py", kClean);
  auto r = lint({"a.py"}, dir.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pyproject.toml:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("invalid TOML"), std::string::npos) << r.err;
}

TEST(lint_cli, inline_ignore_comment_suppresses_one_rule) {
  ScratchFolder dir("cli-inline");
  std::string source = kLeaky;
  source.replace(source.find("total += loss\n"), 14, "total += loss  # gpuleak: ignore[GL101]\n");
  auto f = dir.write("a.py", source);
  auto r = lint({"--no-config", f.string()});
  EXPECT_EQ(r.out.find("error GL101"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warning GL502"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 suppressed inline"), std::string::npos) << r.out;
}

TEST(lint_cli, list_rules_shows_every_rule) {
  auto r = lint({"--list-rules"});
  EXPECT_EQ(r.exit_code, 0);
  for (const RuleInfo* rule : rule_catalog()) {
    EXPECT_NE(r.out.find(std::string(rule->id) + "  "), std::string::npos) << rule->id;
  }
}

TEST(lint_cli, colour_only_when_asked_in_a_pipe) {
  ScratchFolder dir("cli-colour");
  auto f = dir.write("a.py", kLeaky);
  EXPECT_EQ(lint({"--no-config", f.string()}).out.find("\033["), std::string::npos);
  EXPECT_NE(lint({"--no-config", "--color", "always", f.string()}).out.find("\033["),
            std::string::npos);
}

TEST(lint_cli, output_flag_writes_the_report_to_a_file) {
  ScratchFolder dir("cli-output");
  auto f = dir.write("a.py", kLeaky);
  auto report = dir.path() / "report.sarif";
  auto r = lint({"--no-config", "--format", "sarif", "-o", report.string(), f.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  std::ifstream in(report);
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["version"], "2.1.0");
  EXPECT_EQ(doc["runs"][0]["results"].size(), 2u);
}

TEST(lint_cli, parallel_and_serial_runs_agree) {
  auto corpus = std::string(GPULEAK_SOURCE_DIR) + "/tests/lint/corpus";
  auto serial = lint({"--no-config", "--format", "json", "-j", "1", corpus});
  auto parallel = lint({"--no-config", "--format", "json", "-j", "4", corpus});
  auto a = nlohmann::json::parse(serial.out);
  auto b = nlohmann::json::parse(parallel.out);
  EXPECT_EQ(a["findings"], b["findings"]);
  EXPECT_GT(a["findings"].size(), 50u);
}

TEST(lint_cli, a_folder_that_cannot_be_listed_is_reported_and_fails_the_run) {
  // As root every folder can be listed; drop to nobody for the child.
  std::vector<std::string> prefix;
  if (geteuid() == 0) {
    if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "root without setpriv";
    prefix = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  }
  ScratchFolder dir("cli-unlistable");
  dir.write("pkg/ok/leaky.py", kLeaky);
  dir.write("pkg/closed/hidden.py", kLeaky);
  for (const auto& p : {dir.path(), dir.path() / "pkg", dir.path() / "pkg" / "ok"}) {
    chmod(p.c_str(), 0755);
  }
  chmod((dir.path() / "pkg" / "ok" / "leaky.py").c_str(), 0644);
  chmod((dir.path() / "pkg" / "closed").c_str(), 0);
  std::vector<std::string> args = prefix;
  for (const auto& a :
       {kBinary, std::string("lint"), std::string("--no-config"), (dir.path() / "pkg").string()}) {
    args.push_back(a);
  }
  auto r = run_child(args);
  args.insert(args.end() - 1, "--exit-zero");
  auto zero = run_child(args);
  chmod((dir.path() / "pkg" / "closed").c_str(), 0755);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("closed: cannot list folder"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("leaky.py:9:9: error GL101"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 folder could not be listed"), std::string::npos) << r.out;
  EXPECT_EQ(zero.exit_code, 0) << zero.err;
}

TEST(lint_cli, exit_zero_keeps_findings_but_not_usage_errors) {
  ScratchFolder dir("cli-exit-zero");
  auto leaky = dir.write("leaky.py", kLeaky);
  auto r = lint({"--no-config", "--exit-zero", leaky.string()});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("error GL101"), std::string::npos) << r.out;
  auto usage = lint({"--no-config", "--exit-zero", (dir.path() / "absent.py").string()});
  EXPECT_EQ(usage.exit_code, 2);
}

TEST(lint_cli, statistics_counts_findings_per_rule) {
  ScratchFolder dir("cli-statistics");
  dir.write("a.py", kLeaky);
  dir.write("b.py", kLeaky);
  auto r = lint({"--no-config", "--statistics", dir.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("2  GL101  error    loss-accumulated-with-graph\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("2  GL502  warning  empty-cache-in-loop\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("total += loss"), std::string::npos) << "no individual findings";
  EXPECT_EQ(
      lint({"--no-config", "--statistics", "--format", "json", dir.path().string()}).exit_code, 2);
}

TEST(lint_cli, standard_input_is_linted_under_the_name_given) {
  auto r =
      lint({"--no-config", "--format", "json", "--stdin-filename", "train.py", "-"}, {}, kLeaky);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["findings"].size(), 2u);
  EXPECT_EQ(doc["findings"][0]["path"], "train.py");
  EXPECT_EQ(doc["findings"][0]["line"], 9);
  auto plain = lint({"--no-config", "-"}, {}, kClean);
  EXPECT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  EXPECT_NE(plain.out.find("No findings in 1 file."), std::string::npos) << plain.out;
  EXPECT_EQ(lint({"--no-config", "--stdin-filename", "x.py", "a.py"}).exit_code, 2);
}

TEST(lint_cli, github_format_writes_one_escaped_workflow_command_per_finding) {
  ScratchFolder dir("cli-github");
  auto f = dir.write("dir,with:odd/a.py", kLeaky);
  auto r = lint({"--no-config", "--format", "github", f.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.out), 2u) << r.out;
  std::size_t at = r.out.find("::error file=");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dir%2Cwith%3Aodd/a.py,line=9,col=9,endLine=9,endColumn=22,"
                       "title=GL101 loss-accumulated-with-graph::"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("::warning file="), std::string::npos) << r.out;  // GL502
}

TEST(lint_cli, noqa_comments_suppress_gpuleak_codes_only) {
  ScratchFolder dir("cli-noqa");
  std::string source = kLeaky;
  std::string line = "total += loss\n";
  auto with = [&](const std::string& comment) {
    std::string s = source;
    s.replace(s.find(line), line.size(), "total += loss  " + comment + "\n");
    return dir.write("a.py", s);
  };
  EXPECT_EQ(lint({"--no-config", "--select", "GL101", with("# noqa: GL101").string()}).exit_code,
            0);
  EXPECT_EQ(lint({"--no-config", "--select", "GL101", with("# noqa").string()}).exit_code, 0);
  EXPECT_EQ(lint({"--no-config", "--select", "GL101", with("# noqa: E501").string()}).exit_code, 1);
  EXPECT_EQ(
      lint({"--no-config", "--select", "GL101", with("# NOQA:E501,GL101").string()}).exit_code, 0);
}

TEST(lint_cli, a_statement_that_does_not_parse_is_reported_and_the_rest_linted) {
  ScratchFolder dir("cli-partial");
  std::string source = std::string(kLeaky) + "\nvalue = [1, 2 3]\n";
  auto f = dir.write("a.py", source);
  auto r = lint({"--no-config", "--format", "json", f.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["statements_not_parsed"].size(), 1u) << r.out;
  EXPECT_EQ(doc["statements_not_parsed"][0]["line"], 12);
  EXPECT_EQ(doc["findings"].size(), 2u);
  EXPECT_NE(r.err.find("a.py:12:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("it is not analysed, the rest of the file is"), std::string::npos) << r.err;
  // Valid Python that tree-sitter-python 0.23 rejects is linted in full.
  auto valid = dir.write("b.py", "import torch\nhost, *rest = endpoint, *[]\n");
  auto v = lint({"--no-config", valid.string()});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_TRUE(v.err.empty()) << v.err;
}

TEST(lint_cli, starred_elements_after_return_and_yield_parse) {
  // torch/_higher_order_ops/associative_scan.py returns `*[None] * 3, *g_xs, ...`
  // (valid since Python 3.8), which tree-sitter-python 0.23 rejects.
  ScratchFolder dir("cli-return-starred");
  auto f = dir.write("scan.py",
                     "import torch\n\n\n"
                     "def backward(ctx, *grads):\n"
                     "    g_xs = [g * 2 for g in grads]\n"
                     "    return *[None] * 3, *g_xs, *[None] * ctx.num_additional_inputs\n\n\n"
                     "def chunks(xs, tail):\n"
                     "    yield *xs, *tail  # a comment with return *x\n");
  auto r = lint({"--no-config", "--format", "json", f.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_TRUE(doc["statements_not_parsed"].empty()) << r.out;
  EXPECT_TRUE(doc["files_not_linted"].empty()) << r.out;
  // A statement that is invalid for another reason is still reported.
  auto bad = dir.write("bad.py", "import torch\n\n\ndef f(x):\n    return *x, [1, 2 3]\n");
  auto b = lint({"--no-config", "--format", "json", bad.string()});
  auto bad_doc = nlohmann::json::parse(b.out);
  EXPECT_EQ(bad_doc["statements_not_parsed"].size(), 1u) << b.out;
}

TEST(lint_cli, unknown_key_in_the_configuration_is_a_usage_error) {
  ScratchFolder dir("cli-config-key");
  dir.write("pyproject.toml", "[tool.gpuleak]\nselct = [\"GL1\"]\n");
  dir.write("a.py", kClean);
  auto r = lint({"."}, dir.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown key `selct`"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean `select`"), std::string::npos) << r.err;
}

TEST(lint_cli, sarif_rules_point_to_their_documentation) {
  ScratchFolder dir("cli-sarif-help");
  auto f = dir.write("a.py", kLeaky);
  auto r = lint({"--no-config", "--format", "sarif", f.string()});
  auto doc = nlohmann::json::parse(r.out);
  for (const auto& rule : doc["runs"][0]["tool"]["driver"]["rules"]) {
    std::string uri = rule["helpUri"];
    EXPECT_EQ(uri.substr(uri.size() - rule["id"].get<std::string>().size() - 3),
              rule["id"].get<std::string>() + ".md");
    if (uri.rfind("file://", 0) == 0) {
      EXPECT_TRUE(std::filesystem::exists(uri.substr(7))) << uri;
    }
  }
}

// docs/lint.md is the user's reference: every flag `gpuleak lint --help`
// prints and every rule `--list-rules` lists has its line there.
TEST(lint_cli, every_flag_and_rule_of_the_binary_is_documented) {
  std::ifstream in(std::string(GPULEAK_SOURCE_DIR) + "/docs/lint.md");
  std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(docs.empty());
  auto help = lint({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::size_t flags = 0;
  for (std::size_t at = help.out.find("--"); at != std::string::npos;
       at = help.out.find("--", at + 2)) {
    std::size_t end = at + 2;
    while (end < help.out.size() &&
           (std::isalnum(static_cast<unsigned char>(help.out[end])) || help.out[end] == '-')) {
      ++end;
    }
    std::string flag = help.out.substr(at, end - at);
    if (flag == "--" || flag == "--help") continue;
    ++flags;
    EXPECT_NE(docs.find("`" + flag), std::string::npos) << flag << " is not in docs/lint.md";
  }
  EXPECT_GT(flags, 12u);
  auto rules = nlohmann::json::parse(lint({"--list-rules", "--format", "json"}).out);
  ASSERT_GT(rules.size(), 10u);
  for (const auto& rule : rules) {
    std::string id = rule["id"];
    EXPECT_NE(docs.find("| [" + id + "](rules/" + id + ".md) | " + rule["name"].get<std::string>()),
              std::string::npos)
        << id << " has no row in docs/lint.md's rule table";
  }
}

}  // namespace
}  // namespace gpuleak::lint
