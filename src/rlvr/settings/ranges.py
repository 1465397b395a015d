"""The range of every numeric setting of the core sections and of `train:`,
in one table each (an objective's own are on its settings dataclass,
ObjectiveParams.ranges). The rules between settings (a mini-batch that
divides the step, a response that fits the context) stay with their
sections. tests/settings/test_ranges.py holds the tables to the schema: a
numeric setting without a rule fails it, and each rule refuses a planted
value, named where it was written."""

from __future__ import annotations

from rlvr.schema import AT_LEAST_0, AT_LEAST_1, FRACTION, OPEN_FRACTION, POSITIVE, Range

MAX_SAMPLES = 1024  # eval.k and validation.k: the most samples of a problem (the papers' largest is 256)
SAMPLES = Range(1, MAX_SAMPLES)
CONTEXT = Range(2)  # a prompt token and a response token, at least

CORE = {
    "seeds": AT_LEAST_0,
    "data.arithmetic.levels": AT_LEAST_1, "data.arithmetic.n_train": AT_LEAST_1,
    "data.arithmetic.n_test_per_level": AT_LEAST_1,
    "data.arithmetic.n_validation_per_level": AT_LEAST_0, "data.arithmetic.seed": AT_LEAST_0,
    "data.validation_size": AT_LEAST_0, "data.max_prompt_tokens": AT_LEAST_1,
    "launcher.procs_per_node": AT_LEAST_1, "launcher.nodes": AT_LEAST_1, "launcher.master_port": Range(1, 65535),
    "launcher.timeout_s": POSITIVE,
    "engine.kv_cache_gib": POSITIVE, "engine.gpu_memory_utilization": OPEN_FRACTION, "engine.max_model_len": CONTEXT,
    "engine.seed": AT_LEAST_0, "engine.block_size": AT_LEAST_1, "sweep.seed": AT_LEAST_0,
    "eval.k": SAMPLES, "eval.k_per_set": SAMPLES, "eval.temperature": AT_LEAST_0, "eval.top_p": FRACTION,
    "eval.max_new_tokens": AT_LEAST_1, "eval.limits": AT_LEAST_1, "eval.gpu_memory_utilization": OPEN_FRACTION,
    "eval.max_model_len": CONTEXT,
    "validation.k": SAMPLES, "validation.temperature": AT_LEAST_0, "validation.top_p": FRACTION,
    "validation.max_new_tokens": AT_LEAST_1,
    "verifier.workers": AT_LEAST_1, "verifier.timeout_s": POSITIVE, "verifier.group_timeout_s": POSITIVE,
    "tracking.log_samples": AT_LEAST_0, "tracking.log_completions": AT_LEAST_0,
}

TRAIN = {
    "steps": AT_LEAST_1, "questions_per_step": AT_LEAST_1,
    "responses_per_question": Range(2),  # every objective compares the responses of a question
    "mini_batch_questions": AT_LEAST_1, "micro_batch_questions": AT_LEAST_1, "max_tokens_per_call": AT_LEAST_0,
    "sequences_per_call": AT_LEAST_0, "epochs_per_step": AT_LEAST_1, "max_response_tokens": AT_LEAST_1,
    "temperature": POSITIVE,  # RL samples: 0 (greedy) would give a group of equal responses
    "top_p": FRACTION, "lr": POSITIVE, "weight_decay": AT_LEAST_0, "warmup_steps": AT_LEAST_0, "grad_clip": POSITIVE,
    "zero_stage": Range(0, 3), "checkpoint_every": AT_LEAST_1, "eval_every": AT_LEAST_0, "max_bad_steps": AT_LEAST_1,
    "snapshot_every": AT_LEAST_0, "seed": AT_LEAST_0,
    "incorrect_reward": Range(-1, 1, high_open=True),  # below a right answer's 1 (DAPO's -1, DisCO's 0)
    "overlong_buffer": AT_LEAST_0, "dynamic_sampling_rounds": AT_LEAST_0,
}
