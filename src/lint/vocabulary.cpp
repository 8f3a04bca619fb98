#include "vocabulary.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <vector>

namespace gpuleak::lint::vocabulary {
namespace {

std::string normalized(std::string_view name) {
  name = last_component(name);
  while (!name.empty() && name.front() == '_') name.remove_prefix(1);
  std::string out(name);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool one_of(std::string_view s, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// "val_loader" -> {val, loader}; "trainLoader" -> {train, loader}; "step2" -> {step}.
std::vector<std::string> words(std::string_view raw) {
  raw = last_component(raw);
  std::vector<std::string> out;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) out.push_back(current);
    current.clear();
  };
  for (std::size_t i = 0; i < raw.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c == '_' || std::isdigit(c)) {
      flush();
      continue;
    }
    bool upper = std::isupper(c) != 0;
    bool previous_lower = i > 0 && std::islower(static_cast<unsigned char>(raw[i - 1]));
    if (upper && previous_lower) flush();
    current += static_cast<char>(std::tolower(c));
  }
  flush();
  return out;
}

// `setup_model`, `unwrap_model`, `load_net`: a verb first names an action on a
// network (a function that builds, wraps or returns one), not the network.
bool starts_with_action(std::string_view raw) {
  std::vector<std::string> w = words(raw);
  // `model_init`, `model_factory`, `net_builder`: what makes a network.
  if (w.size() >= 2 &&
      one_of(w.back(), {"init", "initializer", "factory", "builder", "constructor", "creator",
                        "maker", "loader", "getter", "cls", "class", "type", "config", "cfg",
                        "name", "path", "dir", "kwargs", "args"})) {
    return true;
  }
  return w.size() >= 2 &&
         one_of(w.front(),
                {"setup",     "unwrap",   "wrap",        "get",      "build",      "create",
                 "make",      "load",     "save",        "init",     "initialize", "prepare",
                 "configure", "register", "convert",     "export",   "copy",       "freeze",
                 "compile",   "restore",  "reset",       "set",      "update",     "apply",
                 "move",      "print",    "log",         "is",       "has",        "check",
                 "validate",  "patch",    "replace",     "fuse",     "quantize",   "shard",
                 "broadcast", "sync",     "offload",     "dispatch", "resolve",    "find",
                 "lookup",    "select",   "instantiate", "clone",    "attach",     "detach"});
}

}  // namespace

std::string_view last_component(std::string_view dotted) {
  std::size_t dot = dotted.rfind('.');
  return dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
}

static bool names_a_network(std::string_view raw);

bool is_model_name(std::string_view raw) {
  // The name looks like a network's, and no verb or maker word says it is a
  // function handling one (checked second: it splits the name into words).
  return names_a_network(raw) && !starts_with_action(raw);
}

static bool names_a_network(std::string_view raw) {
  std::string original(last_component(raw));
  while (!original.empty() && original.front() == '_') original.erase(0, 1);
  std::string n = normalized(raw);
  if (n.empty()) return false;
  if (one_of(n, {"model",         "net",      "network",    "encoder", "decoder",     "generator",
                 "discriminator", "backbone", "classifier", "policy",  "critic",      "actor",
                 "teacher",       "student",  "unet",       "vae",     "autoencoder", "transformer",
                 "rnn",           "lstm",     "gru",        "cnn",     "mlp",         "head",
                 "predictor",     "regressor"})) {
    return true;
  }
  // netG, netD, model2, model_a, net_1: a role prefix followed by a suffix.
  for (std::string_view prefix : {"model", "net"}) {
    if (n.starts_with(prefix) && n.size() > prefix.size()) {
      char next = original.size() > prefix.size() ? original[prefix.size()] : '\0';
      if (next == '_' || std::isdigit(static_cast<unsigned char>(next)) ||
          std::isupper(static_cast<unsigned char>(next))) {
        return true;
      }
    }
  }
  // teacher_model, ddp_model, resnet, ema_net, text_encoder.
  return n.ends_with("model") || n.ends_with("_net") || n.ends_with("resnet") ||
         n.ends_with("_encoder") || n.ends_with("_decoder");
}

bool is_loss_name(std::string_view raw) {
  std::string n = normalized(raw);
  return contains(n, "loss") || contains(n, "criterion") || n == "crit" || n == "objective";
}

bool is_optimizer_name(std::string_view raw) {
  std::string n = normalized(raw);
  return n.starts_with("opt") || contains(n, "optimizer") || contains(n, "optim");
}

bool is_evaluation_name(std::string_view raw) {
  for (const std::string& w : words(raw)) {
    if (one_of(w, {"eval", "evaluate", "evaluation", "val", "valid", "validate", "validation",
                   "test", "testing", "predict", "prediction", "infer", "inference", "score",
                   "scoring", "dev"})) {
      return true;
    }
  }
  return false;
}

bool is_loader_name(std::string_view raw) {
  for (const std::string& w : words(raw)) {
    if (one_of(w, {"loader", "dataloader", "dl", "batches", "data", "dataset", "ds", "iterator",
                   "stream"})) {
      return true;
    }
    if (w.ends_with("loader")) return true;
  }
  return false;
}

bool is_step_counter_name(std::string_view raw) {
  std::string n = normalized(raw);
  if (one_of(n, {"i", "t", "n", "it", "ii"})) return true;
  std::vector<std::string> ws = words(raw);
  // `layer_idx`, `head_index`, `state_idx`: the index of a part of the model
  // (a fixed set), not of a step.
  for (const std::string& w : ws) {
    if (one_of(w, {"layer",    "layers", "head",    "heads",    "block",    "blocks", "expert",
                   "experts",  "group",  "groups",  "channel",  "channels", "stage",  "stages",
                   "level",    "levels", "module",  "modules",  "param",    "params", "parameter",
                   "state",    "states", "shard",   "shards",   "rank",     "device", "gpu",
                   "dim",      "axis",   "bucket",  "buckets",  "slot",     "slots",  "obj",
                   "object",   "class",  "feature", "features", "scale",    "scales", "codebook",
                   "quantizer"})) {
      return false;
    }
  }
  for (const std::string& w : ws) {
    if (one_of(w, {"idx", "index", "step", "steps", "epoch", "iteration", "iter", "counter",
                   "count", "i", "it", "t", "n"})) {
      return true;
    }
  }
  return false;
}

bool is_device_name(std::string_view raw) {
  std::string n = normalized(raw);
  return contains(n, "device") || n == "dev" || contains(n, "gpu") || contains(n, "cuda") ||
         n == "rank" || n == "local_rank";
}

bool is_accelerator_name(std::string_view raw) {
  std::string n = normalized(raw);
  return n == "accelerator" || n == "fabric" || n == "engine" || n.ends_with("_engine") ||
         n.ends_with("accelerator");
}

bool is_size_name(std::string_view raw) {
  std::string n = normalized(raw);
  if (one_of(n, {"b", "bs", "bsz", "n", "l", "t", "shape", "size", "sizes"})) return true;
  for (const std::string& w : words(raw)) {
    if (one_of(w, {"shape",    "shapes",  "size",  "sizes",  "batch",      "bs",     "bsz",
                   "seq",      "seqlen",  "len",   "length", "lengths",    "tokens", "token",
                   "requests", "request", "numel", "dims",   "resolution", "width",  "height"})) {
      return true;
    }
  }
  return false;
}

bool is_known_library_module(std::string_view root) {
  static constexpr std::string_view kRoots[] = {
      "torch",
      "numpy",
      "np",
      "os",
      "sys",
      "math",
      "time",
      "json",
      "re",
      "random",
      "logging",
      "collections",
      "functools",
      "itertools",
      "copy",
      "pickle",
      "typing",
      "pathlib",
      "shutil",
      "subprocess",
      "warnings",
      "argparse",
      "datetime",
      "glob",
      "io",
      "csv",
      "abc",
      "dataclasses",
      "enum",
      "inspect",
      "contextlib",
      "threading",
      "multiprocessing",
      "queue",
      "traceback",
      "gc",
      "weakref",
      "operator",
      "string",
      "struct",
      "uuid",
      "hashlib",
      "socket",
      "signal",
      "tempfile",
      "unittest",
      "pytest",
      "statistics",
      "transformers",
      "lightning",
      "pytorch_lightning",
      "torchvision",
      "torchaudio",
      "timm",
      "accelerate",
      "deepspeed",
      "horovod",
      "hvd",
      "torchmetrics",
      "einops",
      "sklearn",
      "scipy",
      "pandas",
      "tqdm",
      "wandb",
      "hydra",
      "omegaconf",
      "PIL",
      "cv2",
      "matplotlib",
      "yaml",
      "faiss",
      "tensorboard",
      "tensorboardX",
      "mlflow",
      "datasets",
      "huggingface_hub",
      "peft",
      "diffusers",
      "jax",
      "tensorflow",
      "apex",
      "dgl",
      "torch_geometric",
      "onnx",
      "onnxruntime",
      "safetensors",
      "h5py",
      "requests",
      "fairscale",
      "xformers",
      "triton",
      "bitsandbytes",
      "optuna",
      "ray",
      "mmcv",
      "mmengine",
      "detectron2",
      "ignite",
      "monai",
      "albumentations",
      "skimage",
  };
  for (std::string_view r : kRoots) {
    if (r == root) return true;
  }
  return false;
}

bool is_capitalized(std::string_view name) {
  return !name.empty() && std::isupper(static_cast<unsigned char>(name.front()));
}

}  // namespace gpuleak::lint::vocabulary
