// Where allocation events come from: a capture backend delivers every
// followed CUDA driver call to the recorder (driver_call_events.h).
//
//   cupti       CUPTI's driver-API callbacks (cupti_backend.cpp): sees every
//               call however the program reached the driver, but holds
//               CUPTI's one subscription (a profiler, Nsight or
//               compute-sanitizer cannot subscribe beside it) and costs
//               CUPTI's dispatch on each call.
//   interposer  the driver's entry points wrapped by libgpuleak_interposer.so
//               (src/interposer/, preloaded by `gpuleak run`;
//               interposer_backend.cpp attaches to it): no CUPTI at all, no
//               dispatch; sees the calls made through entry points it handed
//               out, which is all of them when it was loaded before libcuda.
//
// injection.cpp chooses one per process (GPULEAK_BACKEND) and starts it
// once; a backend is never stopped.
#pragma once

#include <memory>
#include <string>

namespace gpuleak::collector {

class Recorder;

enum class StartResult {
  kStarted,
  kHeldByAnotherClient,  // CUPTI's subscription belongs to another tool
  kUnavailable,          // this backend cannot run in this process (said in `why`)
  kFailed,               // it tried and failed (said in `why`)
};

class CaptureBackend {
 public:
  virtual ~CaptureBackend() = default;
  virtual const char* name() const = 0;
  // Starts delivering events to `recorder`. On anything but kStarted, says
  // why; the recorder keeps working for the public API.
  virtual StartResult start(Recorder& recorder, std::string* why) = 0;
};

std::unique_ptr<CaptureBackend> make_cupti_backend();
std::unique_ptr<CaptureBackend> make_interposer_backend();

// What the preloaded interposer says about this process, when it is there.
struct InterposerPresence {
  bool loaded = false;
  bool loaded_before_driver = false;  // every entry point went through it
};
InterposerPresence interposer_presence();

}  // namespace gpuleak::collector
