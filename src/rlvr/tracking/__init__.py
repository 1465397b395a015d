"""MLflow tracking: one run per stage execution, nested under one parent run
per pipeline execution, in an explicit sqlite store.

The store is the user's repository's (`DVC_ROOT`, which DVC points at the
parent repository also for `--queue` and `--temp` experiments, whose stages
run in a temporary copy). Stage runs of one execution share a parent: the same
git commit, params.yaml and DVC experiment name. Tracking must never cost a
result: if the store is locked or unreachable the stage goes on, metrics still
reach the local files, and a warning says so.

One module per job: names (what our metrics and tags are called in MLflow),
views (the runs table's shared view and its URLs), provenance (git, the DVC
experiment, the store's path, dataset digests), tracker (the run a stage logs
into), cleanup (runs a killed process left open, a copied store's artifacts)
and ui (`rlvr ui`).
"""
