// The annotations a traced process writes about itself (torch_tracking,
// clock, distributed, capture_backend, framework_tracking, process_role,
// python_loop, attach),
// read from their JSON text into the report model's typed fields
// (analysis/model/report_model.h). This is the one place that parses them;
// reporters only read the fields.
//
// The trace is input, and input may be damaged or crafted: a value that is
// not a JSON object reads as no annotation, and a field of the wrong type as
// a missing field. Nothing here throws.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

std::optional<TorchTracking> read_torch_tracking(const std::string& value);
std::optional<EventClock> read_event_clock(const std::string& value);
std::optional<DistributedRank> read_distributed_rank(const std::string& value);
std::optional<CaptureBackend> read_capture_backend(const std::string& value);
std::optional<FrameworkTracking> read_framework_tracking(const std::string& value);
std::optional<ProcessRoleAnnotation> read_process_role(const std::string& value);
std::optional<PythonLoopAnnotation> read_python_loop(const std::string& value);
// Folds one `attach` annotation (begin or end) into `session`.
void read_attach_event(const std::string& value, std::optional<AttachSession>& session);

}  // namespace gpuleak::analysis
