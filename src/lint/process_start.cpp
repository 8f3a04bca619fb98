#include "process_start.h"

#include "vocabulary.h"

namespace gpuleak::lint {
namespace {

std::string string_value(const FileAnalysis& file, NodeId node) {
  if (node == kNoNode || file.tree().kind(node) != NodeKind::kString) return {};
  std::string_view t = file.text(node);
  std::string out;
  for (char c : t) {
    if (c != '"' && c != '\'') out += c;
  }
  return out;
}

// get_context("spawn") as a call, or a name assigned from one.
std::string context_method(const FileAnalysis& file, NodeId expression) {
  const SyntaxTree& tree = file.tree();
  for (int hop = 0; expression != kNoNode && hop < 3; ++hop) {
    if (tree.kind(expression) == NodeKind::kCall) {
      if (file.callee_last_name(expression) != "get_context") return {};
      std::vector<NodeId> args = file.positional_arguments(expression);
      NodeId m = !args.empty() ? args.front() : file.keyword_argument(expression, "method");
      std::string v = string_value(file, m);
      return v.empty() ? "default" : v;
    }
    std::string dotted = dotted_text(tree, expression);
    if (dotted.empty()) return {};
    NodeId next = file.first_assigned_value(dotted);
    expression = next;
  }
  return {};
}

bool multiprocessing_module(std::string_view q) {
  return q.starts_with("multiprocessing") || q.starts_with("torch.multiprocessing") ||
         q.starts_with("mp.") || q.starts_with("multiprocess.") ||
         q.starts_with("concurrent.futures") || q.starts_with("billiard");
}

}  // namespace

ProcessStart process_start_kind(const FileAnalysis& file, NodeId call) {
  std::string q = file.qualified_name(file.callee(call));
  if (q == "os.fork" || q == "os.forkpty") return ProcessStart::kFork;
  if (q == "subprocess.Popen") return ProcessStart::kPopen;
  std::string_view last = vocabulary::last_component(q);
  if (last != "Process" && last != "Pool" && last != "ProcessPoolExecutor") {
    return ProcessStart::kNone;
  }
  // multiprocessing.dummy offers the same API over threads.
  if (q.find(".dummy.") != std::string::npos) return ProcessStart::kNone;
  bool known = multiprocessing_module(q);
  NodeId receiver = file.method_receiver(call);
  if (!known && receiver != kNoNode && !context_method(file, receiver).empty()) known = true;
  if (!known) return ProcessStart::kNone;
  if (last == "Process") return ProcessStart::kProcess;
  if (last == "Pool") return ProcessStart::kPool;
  return ProcessStart::kExecutor;
}

std::string start_method(const FileAnalysis& file, NodeId call, ProcessStart kind) {
  if (kind == ProcessStart::kFork) return "fork";
  if (kind == ProcessStart::kPopen || kind == ProcessStart::kNone) return {};
  NodeId receiver = file.method_receiver(call);
  std::string method = receiver != kNoNode ? context_method(file, receiver) : std::string();
  if (method.empty() && kind == ProcessStart::kExecutor) {
    method = context_method(file, file.keyword_argument(call, "mp_context"));
  }
  if (!method.empty() && method != "default") return method;
  // The process-wide default: set_start_method(...) anywhere in the file,
  // else fork (the Linux default before Python 3.14).
  for (NodeId c : file.calls()) {
    if (file.callee_last_name(c) != "set_start_method") continue;
    std::vector<NodeId> args = file.positional_arguments(c);
    NodeId m = !args.empty() ? args.front() : file.keyword_argument(c, "method");
    std::string v = string_value(file, m);
    if (!v.empty()) return v;
  }
  return "fork";
}

}  // namespace gpuleak::lint
