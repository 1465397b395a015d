"""The report's figures: which steps.csv curves each one draws, what each
shows and how to read it (its caption)."""

from __future__ import annotations

from pathlib import Path

from rlvr.report.figures import curve_figure, difficulty_figure, pass_curve_figure

# What each figure shows and how to read it (a method keeps one colour in every figure).
CAPTIONS = {
    "scores": "The main table as bars: avg@k per set and their mean, one bar per model, the black line its 95% "
              "interval over problems. Bars whose intervals overlap are not told apart.",
    "training_dynamics": "Training reward and generation entropy per step, one line per run. Entropy falling "
                         "towards 0 while reward stalls is the collapse SIREN and DisCO address.",
    "kl_length": "KL to the rollout policy and response length per step. A KL spike marks an unstable update; "
                 "length drifting up or down is a change of strategy.",
    "entropy_groups": "SIREN's top-p entropy, and the share of groups whose responses were all right or all wrong "
                      "(no group-relative signal), per step.",
    "constraint": "The trust region at work: the share of DisCO's loss calls whose KL penalty was active, and "
                  "the share of tokens PPO-style objectives clipped, per step.",
    "difficulty_training": "Groups with no correct response and groups with every response correct, per step: "
                           "both give no signal; a method learns from what lies between.",
    "perplexity": "Perplexity of the sampled responses under the rollout policy, per step. A fall towards 1 is "
                  "a policy that no longer explores.",
    "difficulty_bias": "Left: how many questions each model gets at each accuracy (0% and 100% give no group "
                       "signal). Right: each method's accuracy gain over the base model per arithmetic level.",
    "validation": "Validation during training on problems held out of the training mixture: avg@k, pass@k and "
                  "maj@k per validated step. This, not the test sets, picks the best checkpoint.",
    "pass_at_k": "pass@k against k (log scale), averaged over sets: a model that keeps exploring gains more "
                 "from more samples.",
}


def figure_md(path: Path) -> str:
    """A figure with its caption (index.html shows the caption under the image)."""
    caption = CAPTIONS.get(path.stem, path.stem)
    return f"![{caption}](figures/{path.name})\n\n*{caption}*"


# Curves of steps.csv columns: (column, label) pairs per figure, its file and title.
CURVES = (
    ((("reward_mean", "training reward"), ("entropy", "generation entropy (full vocab)")),
     "training_dynamics.png", "training reward and entropy"),
    ((("kl", "KL(pi_old || pi)"), ("response_length", "response length (tokens)")),
     "kl_length.png", "KL and response length"),
    ((("topp_entropy", "top-p entropy (SIREN)"), ("zero_variance_groups", "share of zero-variance groups")),
     "entropy_groups.png", "top-p entropy and uninformative groups"),
    ((("kl_active", "share of loss calls with the KL penalty active"), ("clip_frac", "share of clipped tokens")),
     "constraint.png", "trust region: DisCO's constraint and the clip"),
    ((("all_wrong_groups", "share of groups with no correct response"),
      ("all_correct_groups", "share of groups with every response correct")),
     "difficulty_training.png", "difficulty during training: groups that give no signal (DisCO's solve_none / solve_all)"),
    ((("perplexity", "perplexity of the sampled responses"),),
     "perplexity.png", "perplexity of the rollouts during training (a collapse: towards 1)"),
)


VALIDATION_CURVE = ((("val_avg@k", "validation avg@k"), ("val_pass@k", "validation pass@k (SIREN: kept over training)"),
                     ("val_maj@k", "validation maj@k")),
                    "validation.png", "validation during training (problems held out of training)")


def figures(r) -> list[Path]:
    """The curves and the difficulty, validation and pass@k figures of a Report, made in r.fig_dir."""
    steps, fig_dir = r.steps, r.fig_dir
    made = [curve_figure(steps, list(series), fig_dir / name, title, r.colors) for series, name, title in CURVES]
    made.append(difficulty_figure({n: m.accuracy_by_question() for n, m in r.results.items()},
                                  r.levels[1] if r.levels else {}, f"avg@{r.k}", fig_dir / "difficulty_bias.png",
                                  r.colors))
    series, name, title = VALIDATION_CURVE
    made.append(curve_figure(steps, list(series), fig_dir / name, title, r.colors))
    made.append(pass_curve_figure({n: m.pass_curve() for n, m in r.results.items()}, fig_dir / "pass_at_k.png",
                                  r.colors))
    return [f for f in made if f is not None]
