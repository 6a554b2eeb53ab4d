// Training checkpoints (docs/formats/checkpoint.md). A checkpoint is a directory
// <out>/checkpoints/step-NNNNNNNN/ holding a Hugging Face model (config.json, model.safetensors
// with the f32 master weights, the tokenizer files) that `generate` loads as it is, plus
// optimizer.exp_avg.safetensors and optimizer.exp_avg_sq.safetensors (AdamW's m and v under
// the same HF tensor names and layouts as the weights) and trainer_state.json (step, data
// position, seed, optimizer step count, and the settings a resume must agree with). Every
// tensor is whole, so the layout does not depend on how many processes wrote it. <out>/latest
// names the newest complete checkpoint and is replaced atomically only after every file of it
// is written: a run killed mid-write resumes from the previous one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lmstack/core/json.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/checkpoint_state.h"
#include "lmstack/train/model_train.h"

namespace lmstack::train {

// Writes a checkpoint of `model`, `opt` and `state` under out_dir and points `latest` at it;
// `files` are the tokenizer/generation files to copy. Keeps the newest `keep` checkpoints
// (0 = all). Returns the checkpoint directory. Throws IoError when a file cannot be written
// (`latest` then still names the previous checkpoint).
std::string save_checkpoint(const std::string& out_dir, const TrainModel& model, AdamW& opt,
                            const TrainerState& state, const model::ModelDirFiles& files, int keep);

// The tokenizer and generation files of a loaded model directory, as save_checkpoint and
// model::write_model_dir take them (tokenizer.json read from disk).
model::ModelDirFiles model_dir_files(const model::ModelDir& md);

// The directory `latest` names, or nullopt when out_dir has no checkpoint.
std::optional<std::string> latest_checkpoint(const std::string& out_dir);

// Reads trainer_state.json of a checkpoint directory (FormatError/ConfigError naming it).
TrainerState read_trainer_state(const std::string& checkpoint_dir);
// Loads m, v and the step count into `opt` (the model weights come from load_model_dir of
// the same directory). FormatError naming the file and tensor when one is missing/mis-shaped.
void load_optimizer_state(const std::string& checkpoint_dir, const TrainModel& model, AdamW& opt);

// "step-00000200": the directory name of a step's checkpoint.
std::string checkpoint_step_name(int64_t step);
// Deletes all but the newest `keep` checkpoint directories of <out>/checkpoints (0: keep all).
void prune_checkpoints(const std::string& out_dir, int keep);

// Lines "key: checkpoint X, now Y" for each setting that differs; empty when they match.
std::string describe_settings_mismatch(const Json& saved, const Json& now);

}  // namespace lmstack::train
