// The code cells of a Jupyter notebook as one Python text, so that a model
// defined in one cell is known in the loop of a later cell.
//
// IPython syntax that is not Python (line magics `%time`, shell escapes `!ls`,
// cell magics `%%bash`) is commented out in `code`, keeping every line where
// it was; `display` keeps the cells exactly as written, for code frames.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "source_text.h"

namespace gpuleak::lint {

struct NotebookCode {
  std::string code;
  std::string display;
  std::vector<SourceMap::CellSpan> cells;
  std::string problem;  // non-empty: not a notebook gpuleak can read
};

// Accepts nbformat 4 (and the older 3, "worksheets"). Cells are numbered from
// 1 counting every cell, markdown included, as notebook editors show them.
NotebookCode extract_notebook_code(std::string_view json_bytes);

}  // namespace gpuleak::lint
