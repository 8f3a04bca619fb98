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
#pragma once

#include <cstdint>
#include <string>

namespace gpuleak::collector {

// Picks the clock once per process. `setting` is GPULEAK_CLOCK: "precise",
// "coarse" or "auto" (anything else): auto measures the precise clock and
// takes the coarse one when a read costs more than kSlowClockNs.
void choose_clock(const std::string& setting);

// The chosen clock, now.
std::uint64_t now_ns();

// The `clock` annotation of the trace (JSON): which clock, its resolution
// and what one CLOCK_MONOTONIC read was measured to cost, so a report can say
// how fine its times are.
std::string clock_annotation();

constexpr double kSlowClockNs = 150.0;

}  // namespace gpuleak::collector
