#include "collector/python_frames.h"

#include <dlfcn.h>

#include <atomic>

namespace gpuleak::collector {

namespace {

// The few CPython functions used, all part of the stable or long-standing API.
struct PythonApi {
  int (*is_initialized)() = nullptr;                // Py_IsInitialized
  int (*is_finalizing)() = nullptr;                 // Py_IsFinalizing / _Py_IsFinalizing
  void* (*thread_state_unchecked)() = nullptr;      // PyThreadState_GetUnchecked (3.13+, optional)
  int (*gil_check)() = nullptr;                     // PyGILState_Check
  void* (*current_frame)() = nullptr;               // PyEval_GetFrame (borrowed)
  void* (*frame_back)(void*) = nullptr;             // PyFrame_GetBack (new ref)
  void* (*frame_code)(void*) = nullptr;             // PyFrame_GetCode (new ref)
  int (*frame_line)(void*) = nullptr;               // PyFrame_GetLineNumber
  int (*frame_lasti)(void*) = nullptr;              // PyFrame_GetLasti (3.11+, optional)
  void (*incref)(void*) = nullptr;                  // Py_IncRef
  void (*decref)(void*) = nullptr;                  // Py_DecRef
  int (*gc_disable)() = nullptr;                    // PyGC_Disable (3.10+, optional)
  int (*gc_enable)() = nullptr;                     // PyGC_Enable
  void* (*get_attr)(void*, const char*) = nullptr;  // PyObject_GetAttrString
  const char* (*unicode_utf8)(void*) = nullptr;     // PyUnicode_AsUTF8
  long (*long_value)(void*) = nullptr;              // PyLong_AsLong
  void (*err_fetch)(void**, void**, void**) = nullptr;  // PyErr_Fetch
  void (*err_restore)(void*, void*, void*) = nullptr;   // PyErr_Restore
  void (*err_clear)() = nullptr;                        // PyErr_Clear
};

PythonApi g_api;
std::atomic<bool> g_available{false};

template <class F>
void find(F& slot, const char* name) {
  slot = reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
}

bool holds_gil() {
  if (g_api.is_initialized() == 0) return false;
  if (g_api.is_finalizing && g_api.is_finalizing() != 0) return false;
  // PyGILState_Check compares the GIL holder with this thread's own state.
  // (_PyThreadState_UncheckedGet is not used: before 3.12 it returns the
  // GIL holder's state whichever thread asks.)
  if (g_api.gil_check() != 1) return false;
  return !g_api.thread_state_unchecked || g_api.thread_state_unchecked() != nullptr;
}

}  // namespace

void load_python_api() {
  PythonApi api;
  find(api.is_initialized, "Py_IsInitialized");
  find(api.is_finalizing, "Py_IsFinalizing");
  if (!api.is_finalizing) find(api.is_finalizing, "_Py_IsFinalizing");
  find(api.thread_state_unchecked, "PyThreadState_GetUnchecked");
  find(api.gil_check, "PyGILState_Check");
  find(api.current_frame, "PyEval_GetFrame");
  find(api.frame_back, "PyFrame_GetBack");
  find(api.frame_code, "PyFrame_GetCode");
  find(api.frame_line, "PyFrame_GetLineNumber");
  find(api.frame_lasti, "PyFrame_GetLasti");
  find(api.incref, "Py_IncRef");
  find(api.decref, "Py_DecRef");
  find(api.gc_disable, "PyGC_Disable");
  find(api.gc_enable, "PyGC_Enable");
  find(api.get_attr, "PyObject_GetAttrString");
  find(api.unicode_utf8, "PyUnicode_AsUTF8");
  find(api.long_value, "PyLong_AsLong");
  find(api.err_fetch, "PyErr_Fetch");
  find(api.err_restore, "PyErr_Restore");
  find(api.err_clear, "PyErr_Clear");
  bool complete = api.is_initialized && api.gil_check && api.current_frame && api.frame_back &&
                  api.frame_code && api.frame_line && api.incref && api.decref && api.get_attr &&
                  api.unicode_utf8 && api.long_value && api.err_fetch && api.err_restore &&
                  api.err_clear;
  if (!complete) return;
  g_api = api;
  g_available.store(true, std::memory_order_release);
}

bool python_available() { return g_available.load(std::memory_order_acquire); }

int PythonCapture::capture() {
  count_ = 0;
  if (!python_available() || !holds_gil()) return 0;
  void* frame = g_api.current_frame();
  if (!frame) return 0;
  if (g_api.gc_disable) gc_was_enabled_ = g_api.gc_disable();
  g_api.incref(frame);
  while (frame && count_ < kMaxFrames) {
    PythonFrameRef& ref = frames_[count_++];
    ref.frame = frame;
    ref.code = g_api.frame_code(frame);
    int position = g_api.frame_lasti ? g_api.frame_lasti(frame) : g_api.frame_line(frame);
    ref.position = position < 0 ? 0 : static_cast<std::uint32_t>(position);
    frame = g_api.frame_back(frame);
  }
  if (frame) g_api.decref(frame);  // deeper than kMaxFrames: drop the rest
  return count_;
}

std::uint32_t PythonCapture::line(int i) const {
  int line = g_api.frame_line(frames_[i].frame);
  return line < 0 ? 0 : static_cast<std::uint32_t>(line);
}

PythonCapture::~PythonCapture() {
  for (int i = 0; i < count_; ++i) {
    if (frames_[i].code) g_api.decref(frames_[i].code);
    g_api.decref(frames_[i].frame);
  }
  if (gc_was_enabled_ == 1 && g_api.gc_enable) g_api.gc_enable();
}

PythonCodeInfo describe_code(void* code) {
  PythonCodeInfo info;
  if (!code) return info;
  void *type = nullptr, *value = nullptr, *traceback = nullptr;
  g_api.err_fetch(&type, &value, &traceback);
  auto text = [](void* object, const char* attribute) -> std::string {
    std::string out;
    void* v = g_api.get_attr(object, attribute);
    if (!v) {
      g_api.err_clear();
      return out;
    }
    if (const char* s = g_api.unicode_utf8(v))
      out = s;
    else
      g_api.err_clear();
    g_api.decref(v);
    return out;
  };
  info.filename = text(code, "co_filename");
  info.function = text(code, "co_qualname");
  if (info.function.empty()) info.function = text(code, "co_name");
  if (void* first = g_api.get_attr(code, "co_firstlineno")) {
    long line = g_api.long_value(first);
    info.first_line = line > 0 ? static_cast<std::uint32_t>(line) : 0;
    g_api.decref(first);
  }
  g_api.err_clear();
  g_api.err_restore(type, value, traceback);
  return info;
}

namespace {
std::atomic<const PythonFrameReader*> g_reader{nullptr};
}  // namespace

void set_python_frame_reader(const PythonFrameReader& reader) {
  if (!reader.frames || !reader.line || !reader.code_info) {
    g_reader.store(nullptr, std::memory_order_release);
    return;
  }
  g_reader.store(new PythonFrameReader(reader), std::memory_order_release);
}

const PythonFrameReader* python_frame_reader() { return g_reader.load(std::memory_order_acquire); }

void pin_code(void* code) {
  if (code) g_api.incref(code);
}

}  // namespace gpuleak::collector
