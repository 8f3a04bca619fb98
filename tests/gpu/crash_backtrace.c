/* Diagnosis aid for the GPU machine (not part of gpuleak): preloaded into a
 * program that dies of SIGABRT/SIGSEGV/SIGBUS without a word, it prints the
 * native stack of the dying thread to stderr, then lets the signal take its
 * course. With PYTHONFAULTHANDLER=1 as well, Python's handler prints every
 * thread's Python stack first and then hands the signal on to this one.
 *
 * build: cc -shared -fPIC -O1 -o crash_backtrace.so crash_backtrace.c
 * use:   LD_PRELOAD=$PWD/crash_backtrace.so program ...
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_fatal(int signo) {
  static const char head[] = "\n=== crash_backtrace: native stack at the fatal signal ===\n";
  void* frames[128];
  int n = backtrace(frames, 128);
  (void)!write(2, head, sizeof head - 1);
  {
    const char* name = strsignal(signo);
    (void)!write(2, name, strlen(name));
    (void)!write(2, "\n", 1);
  }
  backtrace_symbols_fd(frames, n, 2);
  signal(signo, SIG_DFL);
  raise(signo);
}

__attribute__((constructor)) static void install(void) {
  void* warm[2];
  backtrace(warm, 2); /* loads libgcc_s now, not inside the handler */
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_fatal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGABRT, &action, NULL);
  sigaction(SIGSEGV, &action, NULL);
  sigaction(SIGBUS, &action, NULL);
}
