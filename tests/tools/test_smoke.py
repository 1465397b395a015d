"""rlvr smoke: a recipe's real path for two steps, with a verdict per check."""

from types import SimpleNamespace

import pytest
import torch
from helpers import REPO

from rlvr.settings.methods import load_recipe
from rlvr.tools.smoke import smoke_methods
from rlvr.tools.smoke_checks import Report, check_push, trainer_logprobs


def _tiny_policy():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=1)).eval()


class ServedCopy:
    """An engine that serves a copy of the weights it was last pushed."""

    def __init__(self, model):
        self.model = _tiny_policy()
        self.model.load_state_dict(model.state_dict())

    def sleep(self):
        pass

    def token_logprobs(self, prompt, response):
        return trainer_logprobs(SimpleNamespace(ds_engine=SimpleNamespace(module=self.model), device="cpu", pad_id=0),
                                prompt, response)


@pytest.mark.parametrize("push_reaches_the_engine", [True, False])
def test_the_push_check_fails_when_the_engine_keeps_its_old_weights(push_reaches_the_engine):
    model = _tiny_policy()
    engine = ServedCopy(model)
    push = (lambda: engine.model.load_state_dict(model.state_dict())) if push_reaches_the_engine else (lambda: None)
    trainer = SimpleNamespace(ds_engine=SimpleNamespace(module=model), device="cpu", pad_id=0,
                              settings=SimpleNamespace(zero_stage=0), push_weights=push)
    prompt, response = [1, 5, 7, 9], list(range(20, 40))
    report = Report(main=False)
    check_push(trainer, engine, prompt, response, engine.token_logprobs(prompt, response), "float32", report)
    assert report.failed == ([] if push_reaches_the_engine else ["push"])


def test_the_default_runs_each_distinct_objective_once():
    assert smoke_methods(load_recipe(REPO / "params/disco_1.5b.yaml"), None) == [
        "grpo", "grpo_rw", "grpo_er", "dr_grpo", "dapo", "trpa", "discob_logl"]
    assert smoke_methods(load_recipe(REPO / "params/siren_qwen2.5-math-7b.yaml"), None)[0] == "siren"
