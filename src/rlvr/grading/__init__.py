"""Grading model answers against golds, in sandboxed worker processes.

- grades: what a grader returns (Grade, GroupGrade, the statuses), shared helpers
- math_verify_grader: ours (math-verify with answer-text rewrites)
- deepscaler, siren: the papers' own graders, written from their official code
- graders: the graders by name (verifier.grader), run inside a worker
- worker: a grading worker, a fresh interpreter that never imports torch
- pool: the caller's side (Verifier): workers, time budgets, failures made loud
"""
