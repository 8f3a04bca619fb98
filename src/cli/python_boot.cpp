#include "cli/python_boot.h"

namespace gpuleak::cli {

namespace {

// A JSON string is a Python string literal once non-ASCII is escaped.
std::string python_literal(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', /*ensure_ascii=*/true);
}

// Inside the exec: the package's folder is on sys.path only for the import
// (the package imports its own modules through gpuleak.__path__ later).
constexpr const char* kBootBody = R"(import json, os, sys
settings = json.loads(SETTINGS)
folder = settings["python_dir"]
try:
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        from gpuleak import _attach_agent
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    _attach_agent.start(settings)
except BaseException as error:
    try:
        with open(os.path.join(settings["control_dir"], "failed.json"), "w") as out:
            json.dump({"reason": "%s: %s" % (type(error).__name__, error)}, out)
    except BaseException:
        pass
)";

}  // namespace

std::string python_boot_source(const nlohmann::json& settings) {
  std::string body = "SETTINGS = " + python_literal(settings.dump()) + "\n" + kBootBody;
  return "try:\n __import__('builtins').exec(" + python_literal(body) +
         ", {'__name__': 'gpuleak_attach_boot'})\nexcept BaseException:\n pass\n";
}

}  // namespace gpuleak::cli
