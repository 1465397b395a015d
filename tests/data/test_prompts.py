"""Training and evaluation prompts as the model sees them: each recipe's text
after templating, the token ids (one BOS), and the prompt-length filter
against verl's rule on the vendored rows."""

from pathlib import Path

import pytest
import yaml
from helpers import REPO

from rlvr.data import sources
from rlvr.data.prepare import drop_long_prompts
from rlvr.data.prompts import build_prompt, prompt_token_ids
from rlvr.data.records import read_jsonl
from rlvr.schema import ConfigError
from rlvr.settings.load import parse_params
from rlvr.settings.prompt import PromptParams, TrainPromptParams

HUB = REPO / "data" / "vendor" / "hub"
QWEN_MATH_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
DEEPSCALER_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
RECIPES = sorted((REPO / "params").glob("*.yaml"))


@pytest.fixture(scope="module")
def chatml(base_model):
    """SmolLM2's tokenizer: ChatML, the format of the Qwen models' chat template."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base_model)


@pytest.fixture(scope="module")
def bos_tokenizer(base_model):
    """A tokenizer of the Llama-3 / DeepSeek-R1-Distill kind: encoding adds a BOS
    (a TemplateProcessing post-processor, as theirs) and the chat template
    starts with {{ bos_token }}."""
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_model)
    tok.add_special_tokens({"bos_token": "<|begin_of_text|>"})
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", tok.bos_token_id)])
    tok.chat_template = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
                         "\n\n{{ m['content'] }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
    return tok


def recipe_prompt(path: Path) -> PromptParams:
    recipe = yaml.safe_load(path.read_text())
    return parse_params({"prompt": recipe["prompt"], "data": recipe["data"]}).prompt


def openr1_rows() -> list[dict]:
    return read_jsonl(HUB / "Elliott/Openr1-Math-46k-8192/train.jsonl")


@pytest.mark.parametrize("path", [p for p in RECIPES if p.name.startswith("siren")], ids=lambda p: p.stem)
def test_siren_recipes_train_on_the_datasets_own_turns_and_evaluate_with_qwen_math(path, chatml):
    """Training: verl templates each Openr1 row's own messages (LUFFY's system
    turn, then the problem); evaluation: eval_entropy.py's Qwen-math prompt,
    whose hard-coded string (lines 49-54) ChatML reproduces exactly."""
    prompt = recipe_prompt(path)
    row = openr1_rows()[0]
    record = sources.load_hub("openr1_math", HUB)[0]
    assert record.system == row["prompt"][0]["content"] != ""
    trained = build_prompt(record.problem, chatml, prompt.for_training(), record.system)
    assert trained == chatml.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    evaluated = build_prompt(record.problem, chatml, prompt)
    assert evaluated == (f"<|im_start|>system\n{QWEN_MATH_SYSTEM}<|im_end|>\n<|im_start|>user\n"
                         f"{record.problem}<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize("path", [p for p in RECIPES if p.name.startswith("disco")], ids=lambda p: p.stem)
def test_disco_recipes_train_and_evaluate_with_deepscalers_user_turn(path, chatml):
    """scripts/data/deepscaler_dataset.py: one user turn, "{question} {instruction}", for training and evaluation."""
    prompt = recipe_prompt(path)
    assert prompt.for_training() == prompt
    record = sources.load_hub("deepscaler", HUB)[0]
    official = [{"role": "user", "content": f"{record.problem} {DEEPSCALER_INSTRUCTION}"}]
    assert build_prompt(record.problem, chatml, prompt) == \
        chatml.apply_chat_template(official, tokenize=False, add_generation_prompt=True)


def test_a_chat_template_that_writes_bos_gets_one_bos(bos_tokenizer):
    """verl encodes the templated text with add_special_tokens=False; encoding it
    as plain text (what vLLM does with a string) would start with two BOS."""
    tok, bos = bos_tokenizer, bos_tokenizer.bos_token_id
    prompt = PromptParams(user="{problem}", system=QWEN_MATH_SYSTEM)
    ids = prompt_token_ids("What is $1+1$?", tok, prompt)
    turns = [{"role": "system", "content": QWEN_MATH_SYSTEM}, {"role": "user", "content": "What is $1+1$?"}]
    assert ids == tok.apply_chat_template(turns, add_generation_prompt=True, return_dict=False)  # verl's tokens
    assert ids[0] == bos and ids.count(bos) == 1
    assert tok(build_prompt("What is $1+1$?", tok, prompt))["input_ids"][:2] == [bos, bos]
    plain = prompt_token_ids("Q?", tok, PromptParams(user="{problem}", chat_template=False))
    assert plain[0] == bos and plain.count(bos) == 1  # no template: the tokenizer's own BOS


def verl_kept(messages: list[list[dict]], tok, limit: int) -> int:
    """verl's rl_dataset filter on rows of chat messages."""
    return sum(len(tok.apply_chat_template(m, add_generation_prompt=True, return_dict=False)) <= limit for m in messages)


@pytest.mark.parametrize("limit", [1024, 96, 64])
def test_prompt_filter_counts_as_verl_on_the_vendored_rows(limit, chatml):
    siren = PromptParams(user="{problem}", system=QWEN_MATH_SYSTEM, train=TrainPromptParams(system="{dataset_system}"))
    records = sources.load_hub("openr1_math", HUB)
    kept, dropped = drop_long_prompts(records, limit, chatml, siren.for_training())
    assert len(kept) == verl_kept([r["prompt"] for r in openr1_rows()], chatml, limit)
    assert dropped == len(records) - len(kept)
    disco = PromptParams(user="{problem} " + DEEPSCALER_INSTRUCTION)
    records = sources.load_hub("deepscaler", HUB)
    kept, dropped = drop_long_prompts(records, limit, chatml, disco)
    official = [[{"role": "user", "content": f"{r.problem} {DEEPSCALER_INSTRUCTION}"}] for r in records]
    assert len(kept) == verl_kept(official, chatml, limit) and dropped == len(records) - len(kept)
    if limit == 64:
        assert dropped > 0  # the limit bites: the count is not trivially zero


def test_the_data_stage_drops_long_prompts_and_counts_them(tmp_path, chatml):
    from rlvr.data.prepare import prepare

    raw = {"data": {"source": "online", "hub_mirror": str(HUB), "train_sets": ["openr1_math"], "benchmarks": [],
                    "out_dir": str(tmp_path), "max_prompt_tokens": 64},
           "prompt": {"user": "{problem}", "train": {"system": "{dataset_system}"}}}
    params = parse_params(raw)
    counts = prepare(params.data, params.prompt.for_training(), chatml)
    expected = len(openr1_rows()) - verl_kept([r["prompt"] for r in openr1_rows()], chatml, 64)
    assert counts["dropped_long_prompts"] == expected > 0
    assert counts["train"] == len(openr1_rows()) - expected
    kept = read_jsonl(tmp_path / "train" / "train.jsonl")
    assert all(r["system"] == openr1_rows()[0]["prompt"][0]["content"] for r in kept)
    with pytest.raises(ValueError, match="needs the training prompt and the tokenizer"):
        prepare(params.data)


def test_prompt_settings_errors():
    with pytest.raises(ConfigError) as e:
        parse_params({"prompt": {"system": "{dataset_system}", "train": {"user": "no placeholder", "sytem": "x"}},
                      "data": {"max_prompt_tokens": 0}})
    text = str(e.value)
    assert "'prompt.system' uses {dataset_system}" in text
    assert "'prompt.train.user' must contain {problem}" in text
    assert "did you mean 'prompt.train.system'" in text
    assert "'data.max_prompt_tokens' must be >= 1" in text
    with pytest.raises(ConfigError, match="arithmetic carry no system turn"):
        parse_params({"prompt": {"train": {"system": "{dataset_system}"}}})
    with pytest.raises(ValueError, match="has no system turn"):
        build_prompt("Q?", None, PromptParams(system="{dataset_system}"))
    no_system = PromptParams(user="{problem}", system=QWEN_MATH_SYSTEM, train=TrainPromptParams(system="")).for_training()
    assert build_prompt("Q?", None, no_system) == "Question: Q?\nAnswer:"  # "" trains without a system turn


def test_the_registered_sets_with_a_system_turn_are_the_chat_turn_sets():
    """An entry's system column (checked at config time) is what the loader reads a system turn from:
    openr1_math (verl's format) has one on every row, the others none."""
    from rlvr.settings.datasets import REGISTERED

    assert [name for name, e in REGISTERED.items() if e.system_key] == ["openr1_math"]
    assert all(r.system for r in sources.load_hub("openr1_math", HUB))
    assert not any(r.system for r in sources.load_hub("deepscaler", HUB))
