"""Training: the trainer's loop, the update, the policy's forward and the DeepSpeed engine."""
