/* Reads the calling thread's Python frames without the GIL.
 *
 * PyTorch releases the GIL while it runs an operator, so the allocations a
 * Python line causes happen on a thread that does not hold it, and the
 * collector must never take it (the allocator's lock is held). This thread's
 * own frames cannot change while it is inside C code, so they can be read
 * directly: the interpreter's frame chain of this thread, each frame's code
 * object and instruction offset. Nothing here allocates, raises, or touches
 * a reference count.
 *
 * The frame layout is internal to CPython and changes between minor
 * versions, so this file is compiled against the headers of one (ahead, by
 * the build and scripts/package, or the first time it is needed: see
 * frame_reader.py), and registered with the collector through
 * gpuleak_set_python_frame_reader().
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030B0000
#error "the frame reader needs Python 3.11 or newer"
#endif

/* The major and minor version whose frame layout this reader reads
 * (0x030B for 3.11); frame_reader.py loads it only into that Python. */
unsigned gpuleak_python_frame_reader_built_for(void) { return PY_VERSION_HEX >> 16; }

static _PyInterpreterFrame* current_frame(PyThreadState* tstate) {
#if PY_VERSION_HEX >= 0x030D0000
  return tstate->current_frame;
#else
  return tstate->cframe ? tstate->cframe->current_frame : NULL;
#endif
}

static PyCodeObject* frame_code(_PyInterpreterFrame* frame) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* executable = frame->f_executable;
  return (executable && PyCode_Check(executable)) ? (PyCodeObject*)executable : NULL;
#else
  return frame->f_code;
#endif
}

/* Frames of the calling thread, innermost first: code objects and the
 * offset of the current instruction (in code units). Returns the count. */
int gpuleak_python_frames(void** codes, int* lastis, int max) {
  PyThreadState* tstate = PyGILState_GetThisThreadState();
  if (!tstate) return 0; /* a thread Python does not know (e.g. autograd's) */
  int count = 0;
  for (_PyInterpreterFrame* frame = current_frame(tstate); frame && count < max;
       frame = frame->previous) {
#if PY_VERSION_HEX >= 0x030C0000 /* FRAME_OWNED_BY_CSTACK is an enum value: no #ifdef */
    if (frame->owner == FRAME_OWNED_BY_CSTACK) continue; /* an entry shim, not Python code */
#endif
    PyCodeObject* code = frame_code(frame);
    if (!code || _PyFrame_IsIncomplete(frame)) continue;
    int lasti = _PyInterpreterFrame_LASTI(frame);
    codes[count] = code;
    lastis[count] = lasti < 0 ? 0 : lasti;
    ++count;
  }
  return count;
}

/* The line of `code` at instruction offset `lasti` (code units). */
int gpuleak_python_line(void* code, int lasti) {
  return PyCode_Addr2Line((PyCodeObject*)code, lasti * (int)sizeof(_Py_CODEUNIT));
}

/* Copies a str into `out` as UTF-8 without allocating (a cached UTF-8
 * form or the compact ASCII data when there is one, else encoded here). */
static void copy_text(PyObject* text, char* out, int size) {
  if (size <= 0) return;
  out[0] = '\0';
  if (!text || !PyUnicode_Check(text)) return;
  const char* ready = NULL;
  if (PyUnicode_IS_COMPACT_ASCII(text)) {
    ready = (const char*)PyUnicode_DATA(text);
  } else if (PyUnicode_IS_COMPACT(text) && ((PyCompactUnicodeObject*)text)->utf8) {
    ready = ((PyCompactUnicodeObject*)text)->utf8;
  }
  if (ready) {
    strncpy(out, ready, (size_t)size - 1);
    out[size - 1] = '\0';
    return;
  }
  int kind = PyUnicode_KIND(text);
  const void* data = PyUnicode_DATA(text);
  Py_ssize_t length = PyUnicode_GET_LENGTH(text);
  int used = 0;
  for (Py_ssize_t i = 0; i < length; ++i) {
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    unsigned char bytes[4];
    int n;
    if (c < 0x80) {
      bytes[0] = (unsigned char)c;
      n = 1;
    } else if (c < 0x800) {
      bytes[0] = (unsigned char)(0xC0 | (c >> 6));
      bytes[1] = (unsigned char)(0x80 | (c & 0x3F));
      n = 2;
    } else if (c < 0x10000) {
      bytes[0] = (unsigned char)(0xE0 | (c >> 12));
      bytes[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
      bytes[2] = (unsigned char)(0x80 | (c & 0x3F));
      n = 3;
    } else {
      bytes[0] = (unsigned char)(0xF0 | (c >> 18));
      bytes[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
      bytes[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
      bytes[3] = (unsigned char)(0x80 | (c & 0x3F));
      n = 4;
    }
    if (used + n >= size) break;
    memcpy(out + used, bytes, (size_t)n);
    used += n;
  }
  out[used] = '\0';
}

/* File name, qualified name and first line of a code object. */
void gpuleak_python_code_info(void* code_object, char* filename, int filename_size, char* function,
                              int function_size, int* first_line) {
  PyCodeObject* code = (PyCodeObject*)code_object;
  copy_text(code->co_filename, filename, filename_size);
  copy_text(code->co_qualname, function, function_size);
  *first_line = code->co_firstlineno;
}
