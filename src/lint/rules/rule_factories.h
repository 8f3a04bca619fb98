// One factory per rule file; rule_catalog.cpp lists them.
#pragma once

#include <memory>

#include "lint/rule.h"

namespace gpuleak::lint {

std::unique_ptr<Rule> make_loss_accumulated_with_graph_rule();       // GL101
std::unique_ptr<Rule> make_eval_outputs_kept_with_graph_rule();      // GL102
std::unique_ptr<Rule> make_retain_graph_in_loop_rule();              // GL103
std::unique_ptr<Rule> make_hidden_state_not_detached_rule();         // GL104
std::unique_ptr<Rule> make_backward_create_graph_rule();             // GL105
std::unique_ptr<Rule> make_tensor_kept_in_growing_container_rule();  // GL201
std::unique_ptr<Rule> make_hook_keeps_activations_rule();            // GL202
std::unique_ptr<Rule> make_exception_kept_rule();                    // GL203
std::unique_ptr<Rule> make_epoch_end_keeps_step_outputs_rule();      // GL204
std::unique_ptr<Rule> make_cached_call_keeps_model_rule();           // GL205
std::unique_ptr<Rule> make_metric_state_never_reset_rule();          // GL206
std::unique_ptr<Rule> make_closure_keeps_owner_rule();               // GL207
std::unique_ptr<Rule> make_cuda_in_dataloader_worker_rule();         // GL301
std::unique_ptr<Rule> make_fork_after_cuda_init_rule();              // GL401
std::unique_ptr<Rule> make_process_not_joined_on_failure_rule();     // GL402
std::unique_ptr<Rule> make_dataloader_as_context_manager_rule();     // GL501
std::unique_ptr<Rule> make_empty_cache_in_loop_rule();               // GL502
std::unique_ptr<Rule> make_missing_zero_grad_rule();                 // GL503

}  // namespace gpuleak::lint
