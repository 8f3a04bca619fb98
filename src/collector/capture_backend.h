// Where allocation events come from. Today: CUPTI's driver-API callbacks.
// The interface is small so another source (e.g. interposing the driver's
// symbols when another CUPTI client holds the subscription) can be added
// without touching the recorder.
#pragma once

#include <memory>
#include <string>

namespace gpuleak::collector {

class Recorder;

class CaptureBackend {
 public:
  virtual ~CaptureBackend() = default;
  virtual const char* name() const = 0;
  // Starts delivering events to `recorder`. Returns false and says why if it
  // cannot (the recorder keeps working for the public API).
  virtual bool start(Recorder& recorder, std::string* why) = 0;
};

std::unique_ptr<CaptureBackend> make_cupti_backend();

}  // namespace gpuleak::collector
