#include "block_cuts.h"

#include "statement_lines.h"

namespace gpuleak::lint {
namespace {

// A line that starts outside brackets and strings and not after a
// backslash: where a statement, a clause or a comment may begin.
struct LogicalLine {
  std::uint32_t start = 0;   // first byte of its first physical line
  std::uint32_t indent = 0;  // bytes of leading whitespace
  bool code = false;         // not blank, not only a comment
  // Continues the statement before it (else/elif/except/finally, the
  // definition under a decorator, a stray closing bracket): no cut here.
  bool continues = false;
  bool decorator = false;
};

std::vector<LogicalLine> logical_lines(std::string_view source, std::uint32_t from,
                                       std::uint32_t to) {
  std::vector<LogicalLine> lines;
  bool after_decorator = false;
  scan_statement_lines(source, from, to, [&](std::uint32_t i) {
    std::size_t j = i;
    while (j < to && (source[j] == ' ' || source[j] == '\t' || source[j] == '\f')) ++j;
    char c = j < to ? source[j] : '\n';
    LogicalLine line;
    line.start = i;
    line.indent = static_cast<std::uint32_t>(j - i);
    line.code = !(c == '\n' || c == '\r' || c == '#');
    if (line.code) {
      line.decorator = c == '@';
      line.continues = after_decorator || c == ')' || c == ']' || c == '}' ||
                       continues_statement_before(source, j);
      after_decorator = line.decorator;
    }
    lines.push_back(line);
  });
  return lines;
}

}  // namespace

std::optional<BlockCuts> find_block_cuts(std::string_view source, std::uint32_t from,
                                         std::uint32_t to, std::size_t piece_bytes) {
  std::vector<LogicalLine> lines = logical_lines(source, from, to);
  std::size_t n = lines.size();
  auto end_of = [&](std::size_t k) { return k + 1 < n ? lines[k + 1].start : to; };
  // The region searched: lines [lo, hi) whose own statements sit at `level`.
  std::size_t lo = 0, hi = n;
  std::uint32_t level = 0;
  for (;;) {
    // The largest block: a run of code lines indented deeper than `level`
    // (blank and comment lines inside do not end it).
    std::size_t best_lo = 0, best_hi = 0;
    std::size_t open_lo = n, last_deeper = n;
    auto close_group = [&]() {
      if (open_lo == n) return;
      std::size_t group_hi = last_deeper + 1;
      if (end_of(group_hi - 1) - lines[open_lo].start >
          (best_hi > best_lo ? end_of(best_hi - 1) - lines[best_lo].start : 0)) {
        best_lo = open_lo;
        best_hi = group_hi;
      }
      open_lo = n;
    };
    for (std::size_t k = lo; k < hi; ++k) {
      if (!lines[k].code) continue;
      if (lines[k].indent > level) {
        if (open_lo == n) open_lo = k;
        last_deeper = k;
      } else {
        close_group();
      }
    }
    close_group();
    if (best_hi <= best_lo) return std::nullopt;
    std::uint32_t region_bytes = end_of(hi - 1) - lines[lo].start;
    std::uint32_t block_bytes = end_of(best_hi - 1) - lines[best_lo].start;
    if (static_cast<std::uint64_t>(block_bytes) * 2 < region_bytes) return std::nullopt;
    // The block's statements: code lines at its first line's indentation
    // (the same whitespace) that do not continue the statement before.
    const LogicalLine& first = lines[best_lo];
    std::string_view indentation = source.substr(first.start, first.indent);
    std::vector<std::size_t> statements;
    for (std::size_t k = best_lo; k < best_hi; ++k) {
      const LogicalLine& l = lines[k];
      if (l.code && !l.continues && l.indent == first.indent &&
          source.substr(l.start, l.indent) == indentation) {
        statements.push_back(k);
      }
    }
    if (statements.empty() || statements.front() != best_lo) return std::nullopt;
    // One statement holding most of the block (a loop that is the whole
    // function body): cut inside it instead.
    std::size_t largest = 0;
    std::uint32_t largest_bytes = 0;
    for (std::size_t s = 0; s < statements.size(); ++s) {
      std::size_t next = s + 1 < statements.size() ? statements[s + 1] : best_hi;
      std::uint32_t bytes = end_of(next - 1) - lines[statements[s]].start;
      if (bytes > largest_bytes) {
        largest = s;
        largest_bytes = bytes;
      }
    }
    if (static_cast<std::uint64_t>(largest_bytes) * 2 > block_bytes) {
      std::size_t next = largest + 1 < statements.size() ? statements[largest + 1] : best_hi;
      if (next - statements[largest] > 1) {
        lo = statements[largest];
        hi = next;
        level = first.indent;
        continue;
      }
    }
    // Cut before statements that follow a line of code, pieces of at least
    // piece_bytes; the first cut right after the first statement keeps the
    // skeleton small.
    BlockCuts result;
    result.block_start = first.start + first.indent;
    std::uint32_t block_end = end_of(best_hi - 1);
    for (std::size_t s = 1; s < statements.size(); ++s) {
      std::size_t k = statements[s];
      if (!lines[k - 1].code) continue;
      std::uint32_t at = lines[k].start;
      if (result.cuts.empty() || at - result.cuts.back() >= piece_bytes) {
        if (!result.cuts.empty() && block_end - at < piece_bytes / 2) break;  // a short tail
        result.cuts.push_back(at);
      }
    }
    if (result.cuts.empty()) return std::nullopt;
    // The block's last comments go with its last piece: parsed with included
    // ranges, the skeleton put a comment that followed the cut outside the
    // block, where one parse keeps it inside. A comment indented less than
    // the block (one parse may put it either side) keeps the block whole.
    std::size_t after = best_hi;
    while (after < hi && !lines[after].code &&
           (lines[after].indent >= first.indent ||
            source[lines[after].start + lines[after].indent] != '#')) {
      ++after;
    }
    if (after < hi && !lines[after].code) return std::nullopt;
    block_end = after < n ? lines[after].start : to;
    result.cuts.push_back(block_end);
    return result;
  }
}

}  // namespace gpuleak::lint
