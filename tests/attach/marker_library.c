/* A library for the injector's test: loaded into a running process with
 * dlopen, its entry writes "loaded PID" into the file GPULEAK_TEST_MARKER
 * names (set by the injector's putenv) and returns 7. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((visibility("default"))) int gpuleak_test_write_marker(void) {
  const char* path = getenv("GPULEAK_TEST_MARKER");
  if (!path) return -1;
  FILE* out = fopen(path, "w");
  if (!out) return -2;
  fprintf(out, "loaded %d\n", (int)getpid());
  fclose(out);
  return 7;
}
