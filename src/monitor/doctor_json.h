// The JSON form of a doctor report (`gpuleak doctor --json`); fields are
// listed in docs/monitor.md. Pure function; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "monitor/doctor.h"
#include "monitor/kill_plan.h"

namespace gpuleak::monitor {

nlohmann::json doctor_to_json(const DoctorReport& report, const KillRecord& kills);

}  // namespace gpuleak::monitor
