// Python frames of the calling thread, read through CPython's C API found in
// the process with dlsym (the collector does not link libpython).
//
// Rule: the GIL is never acquired. Frames are read only when the calling
// thread already holds it (it has an attached thread state); otherwise the
// caller falls back to a native stack. Garbage collection is paused while
// frames are read, because reading them can allocate frame objects and a
// collection could re-enter the allocator that called us.
#pragma once

#include <cstdint>
#include <string>

namespace gpuleak::collector {

// Plain data, deliberately without initializers: a capture object lives on
// the stack of every allocation callback, and only the first size() entries
// are ever read.
struct PythonFrameRef {
  void* code;              // PyCodeObject*, referenced while captured
  void* frame;             // PyFrameObject*, referenced while captured
  std::uint32_t position;  // bytecode offset (or line on old Pythons)
};

// Found once; false in a process without Python.
bool python_available();
void load_python_api();

// The frames of the calling thread if it holds the GIL, innermost first.
// Returns the count (0: no Python frames, or GIL not held). The references
// taken are released when the capture object goes away.
class PythonCapture {
 public:
  static constexpr int kMaxFrames = 64;
  PythonCapture() {}  // leaves frames_ uninitialized (see PythonFrameRef)
  ~PythonCapture();
  PythonCapture(const PythonCapture&) = delete;
  PythonCapture& operator=(const PythonCapture&) = delete;

  int capture();
  int size() const { return count_; }
  const PythonFrameRef& operator[](int i) const { return frames_[i]; }
  // Line number of frame i (reads the code object's line table).
  std::uint32_t line(int i) const;

 private:
  PythonFrameRef frames_[kMaxFrames];
  int count_ = 0;
  int gc_was_enabled_ = -1;
};

// Functions of the compiled frame reader (python/gpuleak/python_frame_reader.c),
// which reads the calling thread's frames without the GIL. PyTorch releases
// the GIL while an operator runs, so this is what gives tensor allocations
// their Python lines. Registered once the program's Python is known.
struct PythonFrameReader {
  int (*frames)(void** codes, int* lastis, int max) = nullptr;
  int (*line)(void* code, int lasti) = nullptr;
  void (*code_info)(void* code, char* file, int file_size, char* function, int function_size,
                    int* first_line) = nullptr;
};
// Null pointers unregister. Readers are never freed (threads may be using one).
void set_python_frame_reader(const PythonFrameReader& reader);
// The registered reader, or null.
const PythonFrameReader* python_frame_reader();

// Name, file and first line of a code object. Only while its frame is captured.
struct PythonCodeInfo {
  std::string filename;
  std::string function;
  std::uint32_t first_line = 0;
};
PythonCodeInfo describe_code(void* code);
// Keeps a code object alive for the rest of the process, so its address is
// never reused by another code object (the stack table keys on it).
void pin_code(void* code);

}  // namespace gpuleak::collector
