// The naming conventions of PyTorch code that the analysis leans on when the
// code itself does not say what a value is: a callee called `model` or
// `netG` is a network, `val_loader` yields evaluation batches, a dict key
// called `step` changes every iteration.
//
// Every heuristic about names lives here, so a false positive caused by a
// name has one place to be fixed. All functions take the last component of
// a dotted name ("self.encoder" -> "encoder") and ignore leading underscores
// and case.
#pragma once

#include <string_view>

namespace gpuleak::lint::vocabulary {

// model, net, netG, encoder, resnet, teacher_model ...
bool is_model_name(std::string_view name);
// loss, criterion, loss_fn, compute_loss ...
bool is_loss_name(std::string_view name);
// optimizer, opt, optim, opt_g ...
bool is_optimizer_name(std::string_view name);
// evaluate, validate, val_loader, test_step, predict ...
bool is_evaluation_name(std::string_view name);
// loader, train_loader, dataloader, dl, batches ...
bool is_loader_name(std::string_view name);
// step, global_step, it, batch_idx, epoch, i, counter ...
bool is_step_counter_name(std::string_view name);
// device, dev, gpu, cuda_device, local_rank ...
bool is_device_name(std::string_view name);
// accelerator, fabric, engine, model_engine: objects whose backward(loss)
// differentiates its argument.
bool is_accelerator_name(std::string_view name);
// Sizes that change with the input: batch_size, seq_len, shape, num_tokens,
// bs, max_tokens, B.
bool is_size_name(std::string_view name);

// "self.encoder.layer" -> "layer"; "model" -> "model".
std::string_view last_component(std::string_view dotted);

// A name that starts with a capital letter: by Python's convention a class
// (`Net(...)` builds a module, `Tensor` is a type).
bool is_capitalized(std::string_view name);

// The standard library and the third-party packages training code imports
// (torch, numpy, transformers ...), by the first component of a module's
// name: a module that is not one of them is taken for the project's own.
bool is_known_library_module(std::string_view root);

}  // namespace gpuleak::lint::vocabulary
