#include "notebook.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace gpuleak::lint {
namespace {

using nlohmann::json;

// nbformat stores a cell's source as a string or a list of strings.
bool source_text(const json& source, std::string& out) {
  if (source.is_string()) {
    out = source.get<std::string>();
    return true;
  }
  if (!source.is_array()) return false;
  out.clear();
  for (const auto& part : source) {
    if (!part.is_string()) return false;
    out += part.get_ref<const std::string&>();
  }
  return true;
}

// Comments out IPython-only lines; a cell magic (%%) makes the whole cell
// non-Python (%%bash, %%writefile), so all of it is commented out.
std::string python_view_of_cell(const std::string& cell) {
  std::string out;
  out.reserve(cell.size() + 8);
  std::size_t first = cell.find_first_not_of(" \t\r\n");
  bool cell_magic = first != std::string::npos && cell.compare(first, 2, "%%") == 0;
  std::size_t start = 0;
  while (start <= cell.size()) {
    std::size_t end = cell.find('\n', start);
    std::string line =
        cell.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::size_t lead = line.find_first_not_of(" \t");
    bool ipython_only = lead != std::string::npos && (line[lead] == '%' || line[lead] == '!');
    if (cell_magic || ipython_only) {
      // '#' replaces the first visible character so columns stay put.
      if (lead != std::string::npos) line[lead] = '#';
    }
    out += line;
    if (end == std::string::npos) break;
    out += '\n';
    start = end + 1;
  }
  return out;
}

std::string kernel_language(const json& nb) {
  if (!nb.contains("metadata") || !nb["metadata"].is_object()) return {};
  const json& meta = nb["metadata"];
  for (const char* key : {"language_info", "kernelspec"}) {
    if (meta.contains(key) && meta[key].is_object()) {
      const json& info = meta[key];
      const char* field = std::string_view(key) == "language_info" ? "name" : "language";
      if (info.contains(field) && info[field].is_string()) {
        std::string lang = info[field].get<std::string>();
        std::transform(lang.begin(), lang.end(), lang.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return lang;
      }
    }
  }
  return {};
}

}  // namespace

NotebookCode extract_notebook_code(std::string_view json_bytes) {
  NotebookCode out;
  json nb;
  try {
    nb = json::parse(json_bytes.begin(), json_bytes.end());
  } catch (const json::parse_error& e) {
    out.problem = fmt::format("not a notebook: invalid JSON at byte {}", e.byte);
    return out;
  }
  const json* cells = nullptr;
  bool v3 = false;
  if (nb.is_object() && nb.contains("cells") && nb["cells"].is_array()) {
    cells = &nb["cells"];
  } else if (nb.is_object() && nb.contains("worksheets") && nb["worksheets"].is_array() &&
             !nb["worksheets"].empty() && nb["worksheets"][0].is_object() &&
             nb["worksheets"][0].contains("cells") && nb["worksheets"][0]["cells"].is_array()) {
    cells = &nb["worksheets"][0]["cells"];
    v3 = true;
  }
  if (cells == nullptr) {
    out.problem = "not a notebook: no \"cells\" list (nbformat 3 or 4 expected)";
    return out;
  }
  std::string language = kernel_language(nb);
  if (!language.empty() && language != "python" && language != "python3" && language != "ipython" &&
      language.rfind("python", 0) != 0) {
    out.problem = fmt::format("notebook kernel language is '{}', not Python", language);
    return out;
  }
  std::uint32_t row = 0;
  std::uint32_t number = 0;
  for (const auto& cell : *cells) {
    ++number;
    if (!cell.is_object() || !cell.contains("cell_type") || cell["cell_type"] != "code") {
      continue;
    }
    const char* key = v3 ? "input" : "source";
    std::string source;
    if (!cell.contains(key) || !source_text(cell[key], source)) {
      out.problem = fmt::format("not a notebook: cell {} has no readable \"{}\"", number, key);
      return out;
    }
    if (source.empty() || source.back() != '\n') source += '\n';
    out.cells.push_back({number, row});
    row += static_cast<std::uint32_t>(std::count(source.begin(), source.end(), '\n'));
    out.code += python_view_of_cell(source);
    out.display += source;
  }
  return out;
}

}  // namespace gpuleak::lint
