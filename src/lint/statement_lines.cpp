#include "statement_lines.h"

#include <cctype>

namespace gpuleak::lint {

namespace {

bool starts_with_word(std::string_view source, std::size_t at, std::string_view word) {
  if (source.substr(at, word.size()) != word) return false;
  char next = at + word.size() < source.size() ? source[at + word.size()] : ' ';
  return !(std::isalnum(static_cast<unsigned char>(next)) || next == '_');
}

}  // namespace

void scan_statement_lines(std::string_view source, std::uint32_t from, std::uint32_t to,
                          const std::function<void(std::uint32_t line_start)>& at_line) {
  std::size_t depth = 0;
  char quote = 0;       // inside a string opened with this character
  bool triple = false;  // ... with three of them
  bool continued = false;
  std::size_t i = from;
  while (i < to) {
    // At the start of a line.
    if (quote == 0 && depth == 0 && !continued) at_line(static_cast<std::uint32_t>(i));
    continued = false;
    bool string_continues = false;  // a one-line string escapes its newline
    // Through the line.
    for (; i < to && source[i] != '\n'; ++i) {
      char c = source[i];
      if (quote != 0) {
        if (c == '\\') {
          ++i;  // an escaped character, quote or newline included
          if (i < to && source[i] == '\n') {
            string_continues = true;
            break;
          }
          continue;
        }
        if (c == quote) {
          if (!triple) {
            quote = 0;
          } else if (i + 2 < to && source[i + 1] == quote && source[i + 2] == quote) {
            quote = 0;
            i += 2;
          }
        }
        continue;
      }
      if (c == '#') {
        while (i < to && source[i] != '\n') ++i;
        break;
      }
      if (c == '\'' || c == '"') {
        quote = c;
        triple = i + 2 < to && source[i + 1] == c && source[i + 2] == c;
        if (triple) i += 2;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
        --depth;
      } else if (c == '\\' && i + 1 < to && source[i + 1] == '\n') {
        continued = true;
      }
    }
    // A one-line string cannot span lines, unless its newline is escaped
    // (`"deprecated, \` then the rest on the next line).
    if (quote != 0 && !triple && !string_continues) quote = 0;
    ++i;  // the newline
  }
}

bool continues_statement_before(std::string_view source, std::size_t at) {
  return starts_with_word(source, at, "else") || starts_with_word(source, at, "elif") ||
         starts_with_word(source, at, "except") || starts_with_word(source, at, "finally");
}

}  // namespace gpuleak::lint
