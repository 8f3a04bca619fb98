// libFuzzer entry point: any bytes, as Python and as a notebook, must give
// findings or a problem, never a crash, a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lint/lint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gpuleak::lint::Linter linter;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  linter.lint_python("fuzz.py", bytes);
  if (size > 0 && data[0] == '{') linter.lint_notebook("fuzz.ipynb", bytes);
  return 0;
}
