// How the collector talks to the user of a traced program: rarely, on
// stderr, prefixed "gpuleak:". The one rule: if anything goes wrong inside
// the collector, it disables itself, says so once, and lets the program run.
#pragma once

namespace gpuleak::collector {

// printf-style; always printed.
void say(const char* format, ...) __attribute__((format(printf, 1, 2)));
// Printed only with GPULEAK_VERBOSE=1.
void say_verbose(const char* format, ...) __attribute__((format(printf, 1, 2)));
void set_verbose(bool verbose);

// Stops all recording for the rest of the process and prints
// "gpuleak: collector disabled in process N: <reason>; ..." once.
void disable_collector(const char* format, ...) __attribute__((format(printf, 1, 2)));
bool collector_disabled();

// Called once, with the reason, right after the collector disabled itself
// (injection.cpp records it in the trace so the report can say so). Runs on
// the thread that disabled it, possibly inside the recorder's writer: it
// must not flush or block.
void set_disable_listener(void (*listener)(const char* reason));

}  // namespace gpuleak::collector
