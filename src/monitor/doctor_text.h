// The people's form of a doctor report: the GPUs, the processes that hold
// them with a one-word verdict, then each finding with its evidence, cause
// and what to do, and at the end what --kill-orphans did.
// Pure function; thread-safe.
#pragma once

#include <string>

#include "monitor/doctor.h"
#include "monitor/kill_plan.h"

namespace gpuleak::monitor {

std::string render_doctor_text(const DoctorReport& report, const KillRecord& kills);

}  // namespace gpuleak::monitor
