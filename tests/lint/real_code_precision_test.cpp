// False positives found on real training code (issue 36: every finding of
// bench/baselines/cpu/lint-real-trees.json judged), each on the shape of
// the code it was found in, beside the real leak of the same shape, which
// must still be found.
#include <gtest/gtest.h>

#include "lint/file_analysis.h"
#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

using Lines = std::vector<std::pair<std::string, int>>;

// The (rule, line) pairs gpuleak reports on `source`.
Lines findings(std::string_view source) {
  Lines out;
  for (const Finding& f : testing::lint_snippet(source).findings) {
    out.emplace_back(std::string(f.rule->id), static_cast<int>(f.start.line));
  }
  return out;
}

std::string replaced(std::string source, std::string_view from, std::string_view to) {
  std::size_t at = source.find(from);
  EXPECT_NE(at, std::string::npos) << "no `" << from << "`";
  if (at != std::string::npos) source.replace(at, from.size(), to);
  return source;
}

// --- tuples unpacked from a call -------------------------------------------

TEST(lint_real_code, later_elements_of_a_criterion_tuple_are_no_graph_without_evidence) {
  // fairseq fairseq/tasks/online_backtranslation.py:538-549 (and
  // semisupervised_translation.py:420-423): a criterion returns the loss,
  // the sample size (an int) and a logging dict of `loss.data` and ints.
  std::string source =
      "import torch\n"
      "class Task:\n"
      "    def train_step(self, samples, model, criterion, optimizer, weights):\n"
      "        agg_loss, agg_sample_size, agg_logging_output = 0.0, 0.0, {}\n"
      "        for task_subtype, smp in samples.items():\n"
      "            loss, sample_size, logging_output = criterion(model, smp)\n"
      "            loss *= weights[task_subtype]\n"
      "            optimizer.backward(loss)\n"
      "            agg_loss += loss.item()\n"
      "            agg_sample_size += sample_size\n"
      "            for k in logging_output:\n"
      "                agg_logging_output[task_subtype + k] += logging_output[k]\n"
      "                agg_logging_output[k] += logging_output[k]\n"
      "        return agg_loss, agg_sample_size, agg_logging_output\n";
  EXPECT_EQ(findings(source), Lines{});
  // Summing the loss itself keeps every step's graph.
  EXPECT_EQ(findings(replaced(source, "agg_loss += loss.item()", "agg_loss += loss")),
            (Lines{{"GL101", 9}}));
  // A later element with evidence of its own (handed to a loss function) is one.
  std::string evidenced =
      replaced(source, "            optimizer.backward(loss)\n",
               "            optimizer.backward(loss + torch.nn.functional.mse_loss(sample_size, "
               "smp))\n");
  EXPECT_EQ(findings(evidenced), (Lines{{"GL101", 10}}));
}

TEST(lint_real_code, a_float_the_files_own_forward_returns_in_a_tuple_is_no_graph) {
  // pytorch_geometric examples/colors_topk_pool.py:34-97 (and
  // triangles_sag_pool.py:99): `out, _, ratio = model(data)` where Net.forward
  // returns `ratio = out.size(0) / x.size(0)`, a Python float.
  std::string source =
      "import torch\n"
      "class Net(torch.nn.Module):\n"
      "    def forward(self, data):\n"
      "        x = self.conv(data.x, data.edge_index)\n"
      "        out, attn_loss = self.pool(x)\n"
      "        ratio = out.size(0) / x.size(0)\n"
      "        return self.lin(out), attn_loss, ratio\n"
      "model = Net().to('cuda')\n"
      "def test(loader):\n"
      "    model.eval()\n"
      "    corrects, total_ratio = [], 0\n"
      "    for data in loader:\n"
      "        data = data.to('cuda')\n"
      "        out, _, ratio = model(data)\n"
      "        pred = out.round().to(torch.long)\n"
      "        corrects.append(pred.eq(data.y.to(torch.long)))\n"
      "        total_ratio += ratio\n"
      "    return torch.cat(corrects, dim=0), total_ratio / len(loader)\n";
  EXPECT_EQ(findings(source), Lines{});
  // The output itself, summed with autograd on, keeps every batch's graph.
  EXPECT_EQ(findings(replaced(source, "total_ratio += ratio", "total_ratio += out.sum()")),
            (Lines{{"GL102", 17}}));
  // A forward returning a tensor there keeps the graph in the sum.
  EXPECT_EQ(findings(replaced(source, "ratio = out.size(0) / x.size(0)", "ratio = out.mean()")),
            (Lines{{"GL102", 17}}));
}

// --- a name rebound from itself ----------------------------------------------

TEST(lint_real_code, arithmetic_rebinding_of_a_tensor_from_itself_grows_nothing) {
  // diffusers examples/dreambooth/train_dreambooth_lora_sdxl.py:1740-1786
  // (and the sd3, advanced and scheduled_huber copies): EDM preconditioning
  // `model_pred = model_pred * (-sigmas) + noisy_model_input` after both
  // arms of an if/else bind model_pred from the unet.
  std::string source =
      "import torch\n"
      "import torch.nn.functional as F\n"
      "def train(args, unet, loader, optimizer, noise_scheduler):\n"
      "    for epoch in range(args.epochs):\n"
      "        for batch in loader:\n"
      "            noisy_model_input = batch['x'].to('cuda')\n"
      "            sigmas = batch['s']\n"
      "            if not args.train_text_encoder:\n"
      "                model_pred = unet(noisy_model_input, return_dict=False)[0]\n"
      "            else:\n"
      "                prompt_embeds = encode(batch)\n"
      "                model_pred = unet(noisy_model_input, prompt_embeds, return_dict=False)[0]\n"
      "            if args.do_edm_style_training:\n"
      "                if noise_scheduler.config.prediction_type == 'epsilon':\n"
      "                    model_pred = model_pred * (-sigmas) + noisy_model_input\n"
      "                elif noise_scheduler.config.prediction_type == 'v_prediction':\n"
      "                    model_pred = model_pred * (-sigmas / (sigmas**2 + 1) ** 0.5) + (\n"
      "                        noisy_model_input / (sigmas**2 + 1))\n"
      "            loss = F.mse_loss(model_pred.float(), batch['t'].float())\n"
      "            loss.backward()\n"
      "            optimizer.step()\n"
      "            optimizer.zero_grad()\n";
  EXPECT_EQ(findings(source), Lines{});
  // Concatenating onto itself is what grows.
  EXPECT_EQ(findings(replaced(source, "model_pred = model_pred * (-sigmas) + noisy_model_input",
                              "model_pred = torch.cat([model_pred, noisy_model_input])")),
            (Lines{{"GL201", 15}}));
  // So is a list extended by `+`.
  std::string history =
      replaced(source, "            loss.backward()\n",
               "            seen = seen + [noisy_model_input]\n            loss.backward()\n");
  history = replaced(history, "    for epoch in range(args.epochs):\n",
                     "    seen = []\n    for epoch in range(args.epochs):\n");
  EXPECT_EQ(findings(history), (Lines{{"GL201", 21}}));
}

// --- writes into a tensor --------------------------------------------------

TEST(lint_real_code, a_masked_write_into_a_grad_tensor_keeps_nothing) {
  // diffusers examples/custom_diffusion/train_custom_diffusion.py:1194-1205
  // (and research_projects/intel_opts/textual_inversion/textual_inversion_bf16.py:589):
  // rows of the embedding's gradient zeroed in place.
  std::string source =
      "import torch\n"
      "def train(args, text_encoder, unet, loader, optimizer, tokenizer, token_id):\n"
      "    for epoch in range(args.epochs):\n"
      "        for batch in loader:\n"
      "            latents = batch['x'].to('cuda')\n"
      "            loss = unet(latents).mean()\n"
      "            loss.backward()\n"
      "            grads = text_encoder.get_input_embeddings().weight.grad\n"
      "            index_grads_to_zero = torch.arange(len(tokenizer)) != token_id\n"
      "            grads.data[index_grads_to_zero, :] = grads.data[index_grads_to_zero, "
      ":].fill_(0)\n"
      "            optimizer.step()\n"
      "            optimizer.zero_grad()\n";
  EXPECT_EQ(findings(source), Lines{});
  // Writing a value with a graph into it records one more CopySlices node a step.
  EXPECT_EQ(
      findings(replaced(source, "grads.data[index_grads_to_zero, :].fill_(0)", "unet(latents)")),
      (Lines{{"GL101", 10}}));
}

// --- calls in exception handlers ----------------------------------------------

TEST(lint_real_code, a_fallback_in_a_broad_handler_is_no_out_of_memory_retry) {
  // diffusers examples/dreambooth/train_dreambooth_sd3.py:1216-1232 (and
  // train_dreambooth_flux.py:1258): a checkpoint-load hook that tries another
  // text-encoder class when the first from_pretrained fails.
  std::string source =
      "import torch\n"
      "def load_model_hook(models, input_dir):\n"
      "    for model in models:\n"
      "        try:\n"
      "            load_model = CLIPTextModelWithProjection.from_pretrained(input_dir, "
      "subfolder='a')\n"
      "            model(**load_model.config)\n"
      "            model.load_state_dict(load_model.state_dict())\n"
      "        except Exception:\n"
      "            load_model = T5EncoderModel.from_pretrained(input_dir, subfolder='b')\n"
      "            model(**load_model.config)\n"
      "            model.load_state_dict(load_model.state_dict())\n";
  EXPECT_EQ(findings(source), Lines{});
  // fairseq fairseq/trainer.py:1155-1167: the same broad handler that checks
  // for out of memory before retrying is the retry the rule is about.
  EXPECT_EQ(findings(replaced(source, "        except Exception:\n",
                              "        except Exception as e:\n"
                              "            if 'out of memory' not in str(e):\n"
                              "                raise e\n")),
            (Lines{{"GL203", 12}}));
}

// --- gradients off around a nested def -------------------------------------

TEST(lint_real_code, a_nested_def_called_only_under_its_no_grad_function_has_no_graph) {
  // fairseq examples/textless_nlp/pgslm/sample/sample.py:114-166: the
  // closure that appends each decoded step to the batch is defined and
  // called inside `@torch.no_grad() def do_sampling`.
  std::string source =
      "import torch\n"
      "@torch.no_grad()\n"
      "def do_sampling(model, batch, decoder, autoregressive_steps=100):\n"
      "    def autoregressive_step_(output):\n"
      "        new_tokens, new_f0 = decoder(output)\n"
      "        batch['net_input']['src_tokens'] = torch.cat(\n"
      "            [batch['net_input']['src_tokens'], new_tokens], dim=1)\n"
      "    outputs = []\n"
      "    for _ in range(autoregressive_steps):\n"
      "        output = model(**batch['net_input'])\n"
      "        outputs.append(output['token'][:, -1, ...].cpu())\n"
      "        autoregressive_step_(output)\n"
      "    return outputs\n"
      "def main(model, dataloader, decoder):\n"
      "    for batch in dataloader:\n"
      "        produced = do_sampling(model, batch, decoder)\n"
      "        print(produced)\n";
  EXPECT_EQ(findings(source), Lines{});
  // Without the decorator the closure chains every step's graph into the batch.
  EXPECT_EQ(findings(replaced(source, "@torch.no_grad()\n", "")), (Lines{{"GL101", 5}}));
  // Handed out of the function, the closure may run anywhere.
  EXPECT_EQ(findings(replaced(source, "    return outputs\n", "    return autoregressive_step_\n")),
            (Lines{{"GL101", 6}}));
}

// --- methods named like a container's ---------------------------------------

TEST(lint_real_code, insert_of_tensors_is_no_list_insert) {
  // pytorch_geometric examples/tgn.py:57,123-145: LastNeighborLoader.insert(src,
  // dst) writes into fixed-size buffers; list.insert's first argument is an index.
  std::string source =
      "import torch\n"
      "neighbor_loader = LastNeighborLoader(data.num_nodes, size=10, device=device)\n"
      "def train(model, train_loader, optimizer, criterion):\n"
      "    neighbor_loader.reset_state()\n"
      "    total_loss = 0\n"
      "    for batch in train_loader:\n"
      "        optimizer.zero_grad()\n"
      "        batch = batch.to(device)\n"
      "        n_id, edge_index, e_id = neighbor_loader(batch.n_id)\n"
      "        out = model(n_id, edge_index)\n"
      "        loss = criterion(out, batch.y)\n"
      "        neighbor_loader.insert(batch.src, batch.dst)\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        total_loss += float(loss)\n";
  EXPECT_EQ(findings(source), Lines{});
  // A list that gains each step's output at the front keeps them all.
  std::string kept = replaced(source, "neighbor_loader.insert(batch.src, batch.dst)",
                              "history.insert(0, out.detach())");
  kept = replaced(kept, "    neighbor_loader.reset_state()\n", "    history = []\n");
  EXPECT_EQ(findings(kept), (Lines{{"GL201", 12}}));
}

// --- collections that are a function's result -------------------------------

TEST(lint_real_code, one_result_per_round_of_an_inner_optimisation_returned_is_no_leak) {
  // diffusers examples/community/pipeline_null_text_inversion.py:114-146:
  // one optimised embedding per inference step, returned.
  std::string source =
      "import torch\n"
      "import torch.nn.functional as nnf\n"
      "class Inversion:\n"
      "    def null_optimization(self, latents, context, num_inner_steps, epsilon):\n"
      "        uncond_embeddings, cond_embeddings = context.chunk(2)\n"
      "        uncond_embeddings_list = []\n"
      "        latent_cur = latents[-1]\n"
      "        for i in range(self.num_inference_steps):\n"
      "            uncond_embeddings = uncond_embeddings.clone().detach()\n"
      "            uncond_embeddings.requires_grad = True\n"
      "            optimizer = torch.optim.Adam([uncond_embeddings], lr=1e-2)\n"
      "            t = self.scheduler.timesteps[i]\n"
      "            for j in range(num_inner_steps):\n"
      "                noise_pred = self.unet(latent_cur, t, uncond_embeddings)\n"
      "                loss = nnf.mse_loss(noise_pred, latents[i])\n"
      "                optimizer.zero_grad()\n"
      "                loss.backward()\n"
      "                optimizer.step()\n"
      "                if loss.item() < epsilon:\n"
      "                    break\n"
      "            uncond_embeddings_list.append(uncond_embeddings[:1].detach())\n"
      "            with torch.no_grad():\n"
      "                latent_cur = self.unet(latent_cur, t, context)\n"
      "        return uncond_embeddings_list\n"
      "    def invert(self, latents):\n"
      "        context = torch.zeros(2, 77, 768, device='cuda')\n"
      "        return self.null_optimization(latents, context, 10, 1e-5)\n";
  EXPECT_EQ(findings(source), Lines{});
  // Appended on every inner step, it keeps one tensor per training step.
  std::string per_step = replaced(
      source, "            uncond_embeddings_list.append(uncond_embeddings[:1].detach())\n", "");
  per_step = replaced(per_step, "                optimizer.step()\n",
                      "                optimizer.step()\n"
                      "                uncond_embeddings_list.append(noise_pred.detach())\n");
  EXPECT_EQ(findings(per_step), (Lines{{"GL201", 19}}));
}

// --- hooks -------------------------------------------------------------------

TEST(lint_real_code, a_hook_registered_and_removed_in_one_forward_fills_a_list_of_that_call) {
  // diffusers examples/research_projects/sana/train_sana_sprint_diffusers.py:803-826:
  // forward() makes `feat_list`, hooks blocks to fill it, runs the
  // transformer, removes the hooks and consumes the list.
  std::string source =
      "import torch\n"
      "class Discriminator(torch.nn.Module):\n"
      "    def forward(self, hidden_states, timestep):\n"
      "        feat_list = []\n"
      "        def get_features(module, input, output):\n"
      "            feat_list.append(output)\n"
      "            return output\n"
      "        hooks = []\n"
      "        for i, block in enumerate(self.transformer.transformer_blocks):\n"
      "            if i in self.block_hooks:\n"
      "                hooks.append(block.register_forward_hook(get_features))\n"
      "        self.transformer(hidden_states=hidden_states, timestep=timestep)\n"
      "        for hook in hooks:\n"
      "            hook.remove()\n"
      "        res_list = []\n"
      "        for feat, head in zip(feat_list, self.heads):\n"
      "            res_list.append(head(feat))\n"
      "        return torch.cat(res_list, dim=1)\n"
      "def train(disc, loader, optimizer):\n"
      "    for batch in loader:\n"
      "        x = batch.to('cuda')\n"
      "        loss = disc(x, 0).mean()\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        optimizer.zero_grad()\n";
  EXPECT_EQ(findings(source), Lines{});
  // Never removed, every forward adds hooks that keep filling their lists.
  EXPECT_EQ(
      findings(replaced(source, "        for hook in hooks:\n            hook.remove()\n", "")),
      (Lines{{"GL202", 6}}));
}

// --- Lightning -----------------------------------------------------------------

TEST(lint_real_code, predict_step_of_a_script_that_only_fits_is_never_run) {
  // pytorch-lightning examples/pytorch/basics/profiler_example.py:75-109: the
  // module defines predict_step, the script only calls trainer.fit.
  std::string source =
      "import torch\n"
      "from lightning.pytorch import LightningModule\n"
      "from lightning.pytorch.cli import LightningCLI\n"
      "class ModelToProfile(LightningModule):\n"
      "    def training_step(self, batch, batch_idx):\n"
      "        inputs, labels = batch\n"
      "        return self.criterion(self.model(inputs), labels)\n"
      "    def predict_step(self, batch, batch_idx, dataloader_idx: int = None):\n"
      "        inputs = batch[0]\n"
      "        return self.model(inputs)\n"
      "def cli_main():\n"
      "    cli = LightningCLI(ModelToProfile, run=False)\n"
      "    cli.trainer.fit(cli.model, datamodule=cli.datamodule)\n";
  EXPECT_EQ(findings(source), Lines{});
  // A script that predicts keeps every batch's result.
  EXPECT_EQ(findings(source + "    cli.trainer.predict(cli.model, datamodule=cli.datamodule)\n"),
            (Lines{{"GL204", 10}}));
}

// --- writes into slots that exist -----------------------------------------

TEST(lint_real_code, a_slice_or_multi_dimensional_write_fills_existing_slots) {
  // fairseq examples/MMPT/scripts/video_feature_extractor/extract.py:143 and
  // detectron2 structures/rotated_boxes.py:302: `features[a:b] = batch`,
  // `self.tensor[idx, 2] = ...` write into an array; nothing is added.
  std::string source =
      "import torch\n"
      "def extract(model, loader, features, batch_size):\n"
      "    for i, batch in enumerate(loader):\n"
      "        out = model(batch.cuda())\n"
      "        features[i * batch_size:(i + 1) * batch_size] = out.detach()\n"
      "    return features\n";
  EXPECT_EQ(findings(source), Lines{});
  EXPECT_EQ(
      findings(replaced(source, "features[i * batch_size:(i + 1) * batch_size]", "features[i, 0]")),
      Lines{});
  // A list extended by a slice at its end does grow; a dictionary keyed per
  // step does too (the key decides, as before).
  std::string keyed = replaced(source, "def extract(model, loader, features, batch_size):\n",
                               "features = {}\ndef extract(model, loader, batch_size):\n");
  EXPECT_EQ(
      findings(replaced(keyed, "features[i * batch_size:(i + 1) * batch_size]", "features[i]")),
      (Lines{{"GL201", 6}}));
  EXPECT_EQ(findings(replaced(keyed, "features[i * batch_size:(i + 1) * batch_size]",
                              "features[i * batch_size:(i + 1) * batch_size]")),
            Lines{});
}

TEST(lint_real_code, an_index_store_into_a_list_of_fixed_length_replaces_a_slot) {
  // NVIDIA DeepLearningExamples SSD/ssd/coco_pipeline.py:258: one slot per
  // GPU of a list made `[[None] * 4 for i in range(self._num_gpus)]`,
  // written again on every batch.
  std::string source =
      "import torch\n"
      "class Iterator:\n"
      "    def __init__(self, pipes):\n"
      "        self._num_gpus = len(pipes)\n"
      "        self._data_batches = [[None] * 4 for i in range(self._num_gpus)]\n"
      "        self._current_data_batch = 0\n"
      "    def __next__(self):\n"
      "        for i in range(self._num_gpus):\n"
      "            images = torch.zeros(3, device='cuda')\n"
      "            self._data_batches[i][self._current_data_batch] = images\n"
      "        self._current_data_batch = (self._current_data_batch + 1) % 4\n"
      "        return self._data_batches\n"
      "def train(loader):\n"
      "    for step in range(100):\n"
      "        batch = next(loader)\n";
  EXPECT_EQ(findings(source), Lines{});
  // A dictionary made in __init__ gains a key per step.
  std::string dictionary = replaced(source, "[[None] * 4 for i in range(self._num_gpus)]", "{}");
  dictionary = replaced(dictionary, "self._data_batches[i][self._current_data_batch]",
                        "self._data_batches[self._step]");
  dictionary = replaced(dictionary,
                        "        self._current_data_batch = (self._current_data_batch + 1) % 4\n",
                        "        self._step += 1\n");
  EXPECT_EQ(findings(dictionary), (Lines{{"GL201", 10}}));
}

// --- recurrent state restarted per call ------------------------------------

TEST(lint_real_code, a_state_restarted_by_the_method_that_runs_the_steps_spans_one_call) {
  // NVIDIA DeepLearningExamples Tacotron2 model.py:389 (and fairseq's copy):
  // forward() calls initialize_decoder_states(), which binds the state
  // afresh, then decode() once per time step, which feeds it back.
  std::string source =
      "import torch\n"
      "from torch import nn\n"
      "class Decoder(nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.rnn = nn.LSTMCell(4, 4)\n"
      "    def initialize_decoder_states(self, memory):\n"
      "        self.hidden = memory.new_zeros(memory.size(0), 4)\n"
      "        self.cell = memory.new_zeros(memory.size(0), 4)\n"
      "    def decode(self, x):\n"
      "        self.hidden, self.cell = self.rnn(x, (self.hidden, self.cell))\n"
      "        return self.hidden\n"
      "    def forward(self, memory, inputs):\n"
      "        self.initialize_decoder_states(memory)\n"
      "        outputs = []\n"
      "        for x in inputs:\n"
      "            outputs.append(self.decode(x))\n"
      "        return torch.stack(outputs)\n";
  EXPECT_EQ(findings(source), Lines{});
  // Restarted only by a method nothing calls with decode: every call chains.
  EXPECT_EQ(findings(replaced(source, "        self.initialize_decoder_states(memory)\n", "")),
            (Lines{{"GL104", 11}}));
}

// --- which class's method a call reaches -----------------------------------

TEST(lint_real_code, a_method_of_another_class_called_per_step_does_not_make_this_one_per_step) {
  // NVIDIA DeepLearningExamples syngen ctab.py:787: the training loop calls
  // `self.Dtransformer.transform(fake)` of an imported class; the file's own
  // `DataPreprocessing.transform`, which records a data frame's columns,
  // neither runs per step nor receives that tensor.
  std::string source =
      "import torch\n"
      "from lib import ImageTransformer\n"
      "class DataPreprocessing:\n"
      "    def __init__(self):\n"
      "        self.columns = []\n"
      "    def transform(self, df):\n"
      "        for column in df.columns:\n"
      "            entry = dict()\n"
      "            entry['column'] = column\n"
      "            self.columns.append(entry)\n"
      "        return df\n"
      "class Generator:\n"
      "    def __init__(self):\n"
      "        self.Dtransformer = ImageTransformer(4)\n"
      "    def fit(self, loader, model, optimizer):\n"
      "        for epoch in range(10):\n"
      "            for batch in loader:\n"
      "                optimizer.zero_grad()\n"
      "                fake = model(batch.cuda())\n"
      "                loss = self.Dtransformer.transform(fake).sum()\n"
      "                loss.backward()\n"
      "                optimizer.step()\n";
  EXPECT_EQ(findings(source), Lines{});
  // Bound to the file's own class, the call hands it the graph on every step.
  EXPECT_EQ(findings(replaced(source, "ImageTransformer(4)", "DataPreprocessing()")),
            (Lines{{"GL101", 10}}));
}

// --- other frameworks, other loops -----------------------------------------

TEST(lint_real_code, backward_in_an_mxnet_file_is_not_torchs) {
  // NVIDIA DeepLearningExamples MxNet/Classification/RN50v1.5/fit.py:307: an
  // MXNet metric sums scalars; MXNet records no graph outside
  // autograd.record(), and the file has no torch in it.
  std::string source =
      "import mxnet as mx\n"
      "from mxnet import autograd as ag\n"
      "class ScalarMetric(mx.metric.Loss):\n"
      "    def update(self, _, scalar):\n"
      "        self.sum_metric += scalar\n"
      "def train(net, loader, trainer, loss_fn, metric):\n"
      "    for data, label in loader:\n"
      "        with ag.record():\n"
      "            loss = loss_fn(net(data), label)\n"
      "        loss.backward()\n"
      "        trainer.step(data.shape[0])\n"
      "        metric.update(None, loss)\n";
  EXPECT_EQ(findings(source), Lines{});
  // The same code without the MXNet imports reads as torch (its backward).
  std::string torch_like = replaced(source, "import mxnet as mx\n", "");
  torch_like = replaced(torch_like, "from mxnet import autograd as ag\n", "");
  EXPECT_FALSE(findings(torch_like).empty());
}

TEST(lint_real_code, a_while_true_decoding_loop_of_a_module_spans_one_call) {
  // NVIDIA DeepLearningExamples Tacotron2 model.py:576: infer() decodes until
  // the gate fires, concatenating each time step's output; the history is
  // that one call's.
  std::string source =
      "import torch\n"
      "from torch import nn\n"
      "class Decoder(nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.rnn = nn.GRUCell(4, 4)\n"
      "        self.gate = nn.Linear(4, 1)\n"
      "    def decode(self, x, h):\n"
      "        h = self.rnn(x, h)\n"
      "        return h, self.gate(h)\n"
      "    def infer(self, memory):\n"
      "        h = memory[0]\n"
      "        alignments = h\n"
      "        while True:\n"
      "            h, gate = self.decode(memory[1], h)\n"
      "            alignments = torch.cat((alignments, h), dim=0)\n"
      "            if torch.sigmoid(gate) > 0.5:\n"
      "                break\n"
      "        return alignments\n";
  EXPECT_EQ(findings(source), Lines{});
  // Outside a module (a script's object holding the model), the loop runs
  // for as long as the job and the history keeps every graph.
  std::string script = replaced(source, "class Decoder(nn.Module):\n", "class Decoder:\n");
  EXPECT_FALSE(findings(script).empty());
}

TEST(lint_real_code, a_running_value_updated_from_locals_made_under_no_grad_has_no_graph) {
  // fairseq fairseq/modules/kmeans_attention.py:383: the new means are
  // computed from the input under no_grad, then averaged into
  // `self.new_means` outside it; nothing in that average has a graph.
  std::string source =
      "import torch\n"
      "from torch import nn\n"
      "class Kmeans(nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.new_means = None\n"
      "    def forward(self, x):\n"
      "        with torch.no_grad():\n"
      "            means = x.mean(0)\n"
      "        self.new_means = ema(self.new_means, means, 0.9)\n"
      "        return x\n";
  EXPECT_EQ(findings(source), Lines{});
  // Computed with gradients on, the average chains every call's graph.
  std::string with_grad =
      replaced(source, "        with torch.no_grad():\n            means = x.mean(0)\n",
               "        means = x.mean(0)\n");
  EXPECT_EQ(findings(with_grad), (Lines{{"GL104", 9}}));
}

// Debian's torch, torch/utils/hooks.py: BackwardHook.__init__(self, module,
// user_hooks) keeps the user's hook list, and a method hangs a hook that
// uses `self` on a grad_fn. The list is no activation: an __init__ is no
// forward hook. The same class keeping a forward hook's input is the leak.
TEST(lint_real_code, init_with_a_module_parameter_is_no_forward_hook) {
  std::string source =
      "import torch\n"
      "class BackwardHook(object):\n"
      "    def __init__(self, module, user_hooks):\n"
      "        self.user_hooks = user_hooks\n"
      "        self.module = module\n"
      "    def _set_user_hook(self, grad_fn):\n"
      "        def hook(grad_input, _):\n"
      "            for user_hook in self.user_hooks:\n"
      "                user_hook(self.module, grad_input)\n"
      "        grad_fn.register_hook(hook)\n";
  EXPECT_TRUE(findings(source).empty());
  std::string leak =
      source + "    def save(self, module, input, output):\n        self.input = input\n";
  EXPECT_EQ(findings(leak), (Lines{{"GL207", 12}}));
}

// Debian's torch, fsdp/fully_sharded_data_parallel.py: a backward pre-hook
// keys two dicts by `tuple(_handles)`, one slot per group of handles, the
// same every step. A key the function builds is no new tensor per call; the
// tensor handed to a method that runs per item is (pytorch_memlab#18).
TEST(lint_real_code, dict_key_built_in_the_function_is_one_slot) {
  std::string source =
      "import functools\n"
      "import torch\n"
      "class FSDP(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        self._ran = {}\n"
      "    def _register_pre_backward_hooks(self, outputs, handles):\n"
      "        def _pre_backward_hook(_handles: List[FlatParamHandle], *unused: Any) -> None:\n"
      "            _handles_key = tuple(_handles)\n"
      "            if _handles_key and self._ran.get(_handles_key, False):\n"
      "                return\n"
      "            self._ran[_handles_key] = True\n"
      "        def _register_hook(t: torch.Tensor) -> torch.Tensor:\n"
      "            if t.requires_grad:\n"
      "                t.register_hook(functools.partial(_pre_backward_hook, handles))\n"
      "            return t\n"
      "        return _apply_to_tensors(_register_hook, outputs)\n";
  EXPECT_TRUE(findings(source).empty());
}

}  // namespace
}  // namespace gpuleak::lint
