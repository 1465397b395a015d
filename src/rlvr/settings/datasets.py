"""The names a params file may give the data: sets and arithmetic levels.

Apart from the loaders and generators, so that loading params (rlvr.settings.load)
checks them without importing either.
"""

BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "minerva", "olympiad_bench")
OFFLINE_TRAIN_SETS = ("math_train", "aime_1983_2023")  # vendored in data/vendor
HUB_TRAIN_SETS = ("deepscaler", "dapo_math", "openr1_math")  # online (or data.hub_mirror) only
CHAT_TURN_SETS = ("openr1_math",)  # stored as chat turns: each row carries its own system turn
LEVELS = (1, 2, 3, 4, 5, 6, 7)  # arithmetic difficulty levels (rlvr.data.arithmetic)
