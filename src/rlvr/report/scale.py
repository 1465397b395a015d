"""The scale a paper's claims were made at, this run's, and what a verdict may say
across the gap: a claim tested far from the paper's scale (another model or
task, or an order of magnitude fewer steps) is reproduced at this scale or not,
never confirmed or contradicted."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlvr.report.format import markdown

FEWER_STEPS = 10  # a run this many times shorter than the paper's is not at its scale


@dataclass(frozen=True)
class PaperScale:
    name: str
    models: tuple[str, ...]  # hub ids of the models it trained
    train_sets: tuple[str, ...]  # this project's names of its training sets
    task: str
    steps: int  # its shortest training run, in rollout steps
    questions_per_step: int
    source: str


PAPERS = {
    "DisCO": PaperScale(
        "DisCO", ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
                  "deepseek-ai/DeepSeek-R1-Distill-Llama-8B"), ("deepscaler", "dapo_math"),
        "competition math (DeepScaleR-Preview, 40k; DAPO-Math-17K)", 1000, 128,
        "DisCO paper: about 1,400 steps (1.5B) and 1,000 (7B); data.train_batch_size 128 in its scripts"),
    "SIREN": PaperScale(
        "SIREN", ("Qwen/Qwen2.5-Math-7B", "Qwen/Qwen2.5-Math-1.5B", "meta-llama/Llama-3.1-8B"), ("openr1_math",),
        "competition math (Openr1-Math-46k-8192)", 718, 128,
        "SIREN's siren.sh: 2 epochs of 46k problems, train_batch_size 128"),
}


@dataclass(frozen=True)
class RunScale:
    """What this run trained: its model, training sets, and each method's steps and questions per step."""

    model: str
    train_sets: tuple[str, ...]
    steps: dict[str, int] = field(default_factory=dict)
    questions_per_step: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, params) -> "RunScale":
        """A params file's (rlvr.settings.sections.Params): its model, sets and methods' training lengths."""
        methods = params.methods
        return cls(params.model.source, tuple(params.data.train_names), {n: m.train.steps for n, m in methods.items()},
                   {n: m.train.questions_per_step for n, m in methods.items()})

    def at(self, paper: PaperScale, method: str) -> bool:
        """`method` trained as the paper's runs: one of its models, on one of its sets, with steps
        within FEWER_STEPS times its own."""
        return (self.model in paper.models and bool(set(self.train_sets) & set(paper.train_sets))
                and self.steps.get(method, 0) * FEWER_STEPS >= paper.steps)


def paper_of(source: str) -> PaperScale:
    """The paper a claim's source names (SIREN's, or else DisCO's)."""
    return PAPERS["SIREN"] if "SIREN" in source else PAPERS["DisCO"]


SCALE_WORDS = {"supported": "reproduced at this scale", "contradicted": "not reproduced at this scale"}


def scaled_verdict(verdict: str, at_scale: bool) -> str:
    """A verdict's words for a run at the paper's scale (as they are), or far from it."""
    if at_scale:
        return verdict
    head, sep, rest = verdict.partition(" (")
    return SCALE_WORDS.get(head, head) + (sep + rest if sep else "")


def scale_section(scale: RunScale, papers: list[PaperScale]) -> str:
    """The run's scale beside each paper's whose claims are checked, and what follows from the gap."""
    steps = sorted(set(scale.steps.values()))
    questions = sorted(set(scale.questions_per_step.values()))
    seen = sorted({scale.steps[m] * scale.questions_per_step[m] for m in scale.steps})
    span = lambda xs: ", ".join(f"{x:,}" for x in xs)  # noqa: E731
    rows = [["this run", scale.model, ", ".join(scale.train_sets), span(steps), span(questions),
             span(seen) + " per seed"]]
    rows += [[p.name, ", ".join(p.models), p.task, f"{p.steps:,} or more", f"{p.questions_per_step}",
              f"{p.steps * p.questions_per_step:,} or more"] for p in papers]
    table = markdown(["", "model", "training data", "steps", "questions per step", "questions seen"], rows)
    far = [p.name for p in papers if not all(scale.at(p, m) for m in scale.steps)]
    note = (f"This run is far from {' and '.join(far)}'s scale (another model or task, or over {FEWER_STEPS}x fewer "
            "steps): a verdict says whether the claim is reproduced at this scale, and cannot confirm or contradict "
            "the paper." if far else "This run trains at the papers' scale: the verdicts test the claims as stated.")
    sources = "; ".join(p.source for p in papers)
    return f"{table}\n\n{note} (The papers' runs: {sources}.)"
