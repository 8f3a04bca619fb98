// Timestamps of trace records (CLOCK_MONOTONIC, in nanoseconds).
//
// Every recorded allocation and free reads the clock, so its cost is part of
// the collector's per-call overhead. CLOCK_MONOTONIC is normally served by
// the vDSO in about 20 ns, but where the kernel's clocksource cannot be read
// from user space (hpet, acpi_pm, some hypervisors) every read is a system
// call of several hundred nanoseconds -- as much as the allocation it times.
// There the collector reads CLOCK_MONOTONIC_COARSE instead: same time base,
// always served by the vDSO, resolution one scheduler tick (1-4 ms), which
// is finer than anything the reports show (steps, rates, timelines).
//
// Where the kernel itself keeps CLOCK_MONOTONIC on an invariant TSC, the
// collector reads the TSC directly and maps it onto CLOCK_MONOTONIC (same
// time base, nanoseconds): a few nanoseconds instead of 20-30, twice per
// stream-ordered allocate/free pair. The writer thread re-anchors the
// mapping every flush, so it stays within microseconds of the kernel's clock.
#pragma once

#include <cstdint>
#include <string>

namespace gpuleak::collector {

// Picks the clock once per process. `setting` is GPULEAK_CLOCK: "precise",
// "coarse" or "auto" (anything else): auto takes the TSC where the kernel
// trusts it, else measures the precise clock and takes the coarse one when a
// read costs more than kSlowClockNs.
void choose_clock(const std::string& setting);

// The chosen clock, now (CLOCK_MONOTONIC's time base, nanoseconds).
std::uint64_t now_ns();

// Re-anchors the TSC mapping on CLOCK_MONOTONIC (the writer thread, once a
// flush); a no-op for the other clocks.
void recalibrate_clock();

// The `clock` annotation of the trace (JSON): which clock ("monotonic",
// "monotonic-coarse" or "tsc"), its resolution and what one CLOCK_MONOTONIC
// read was measured to cost, so a report can say how fine its times are.
std::string clock_annotation();

constexpr double kSlowClockNs = 150.0;

}  // namespace gpuleak::collector
