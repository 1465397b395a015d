"""The `data:` section: its settings, a dataset entry (one set's source and
columns), the registered sets written as such entries, and the arithmetic levels.

Apart from the loaders (rlvr.data), so that loading params (rlvr.settings.load)
checks the entries without reading a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from rlvr.schema import AT_LEAST_0, AT_LEAST_1, Range

# columns: the columns the entry names; verl: verl's RL parquet (prompt, reward_model, data_source)
FORMATS = ("columns", "verl")
# How the gold is read from its column: clean (a list literal's forms, "$" and a trailing ".0" removed),
# as_stored (the text exactly: SIREN's reward), gsm8k (after the last "####"), boxed (the last \boxed{} of a solution)
GOLDS = ("clean", "as_stored", "gsm8k", "boxed")
ANSWER_FORMS = ("number", "math", "choice")  # rlvr.grading.answer_forms
SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
OWN_DIR = "data/own"  # where a params entry's local files live: a dependency of the data stages (dvc.yaml)
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")


@dataclass(frozen=True)
class DatasetEntry:
    """One training set or benchmark: a local file (`path`) or a hub dataset (`hub`, with `config`,
    `split` and `revision`), with where each row keeps its problem and gold. A column is a name, a
    dotted path into nested columns (`reward_model.ground_truth`), or a column of chat turns
    ([{role, content}]), whose last user turn is the problem and whose system turn is `system`."""

    name: str  # the set's name in the reports and data/prepared/<train|eval>/
    path: str | None = None  # a JSONL, JSON (a list of objects), parquet or CSV file under data/own/
    hub: str | None = None  # a hub dataset id (owner/name), loaded through `datasets` (data.source: online)
    config: str | None = None  # the hub dataset's configuration (GSM8K: main)
    split: str = "train"  # the hub dataset's split
    revision: str | None = None  # the hub dataset's commit or tag (null: the newest; the commit read is in the report)
    format: str = "columns"  # columns: the columns below | verl: prompt, reward_model.ground_truth, data_source
    problem: str | None = None  # the problem's column (columns: problem; verl: prompt's last user turn)
    answer: str | None = None  # the gold's column (columns: answer; verl: reward_model.ground_truth)
    system: str | None = None  # a column with the row's own system turn (verl: prompt's system turn; else none)
    gold: str | None = None  # how the gold is read: clean | as_stored | gsm8k | boxed (columns: clean; verl: as_stored)
    answer_form: str | None = None  # number | math | choice: what a response's final answer must be (null: math)
    dedupe: bool = False  # drop a row whose problem repeats an earlier row's
    limit: int | None = None  # the first N usable rows (null: all)
    skip_bad_rows: bool | None = None  # skip unreadable or empty rows, counted in the report (null: data.skip_bad_rows)
    strip_prefix: str = ""  # text removed from the start of every problem (DAPO-Math's own instruction)
    strip_suffix: str = ""  # text removed from its end

    @property
    def problem_key(self) -> str:
        return self.problem or ("prompt" if self.format == "verl" else "problem")

    @property
    def answer_key(self) -> str:
        return self.answer or ("reward_model.ground_truth" if self.format == "verl" else "answer")

    @property
    def system_key(self) -> str | None:
        return self.system or ("prompt" if self.format == "verl" else None)

    @property
    def gold_rule(self) -> str:
        return self.gold or ("as_stored" if self.format == "verl" else "clean")

    @property
    def where(self) -> str:
        """The source as a reader names it: the file, or the hub id with its config and split."""
        if self.path:
            return self.path
        return f"{self.hub}" + (f" ({self.config})" if self.config else "") + f", split {self.split}"


# DAPO-Math-17k wraps every problem in its own "Answer: $Answer" instruction;
# the recipes use their own prompt, so the problem is taken out of it.
DAPO_PREFIX = ("Solve the following math problem step by step. The last line of your response should be of the "
               "form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n")
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'

# The registered sets, written as the entries a user would write. A benchmark or offline training set is
# also vendored in data/vendor/<benchmarks|train>/<name>.jsonl (data.source: offline reads that copy).
REGISTERED = {e.name: e for e in (
    DatasetEntry("aime24", hub="HuggingFaceH4/aime_2024"),
    DatasetEntry("aime25", hub="yentinglin/aime_2025"),
    # The 83 AMC 2022-23 problems the DisCO and SIREN papers (and DeepScaleR) evaluate on, as vendored.
    DatasetEntry("amc23", hub="AI-MO/aimo-validation-amc"),
    DatasetEntry("math500", hub="HuggingFaceH4/MATH-500", split="test"),
    DatasetEntry("minerva", hub="math-ai/minervamath", split="test", problem="question"),
    DatasetEntry("olympiad_bench", hub="math-ai/olympiadbench", split="test", problem="question",
                 answer="final_answer"),
    DatasetEntry("math_train"),  # vendored only: MATH's training split
    DatasetEntry("aime_1983_2023"),  # vendored only
    DatasetEntry("deepscaler", hub="agentica-org/DeepScaleR-Preview-Dataset"),
    # the hub copy repeats problems (~100x); its gold is cleaned, as this set always was here
    DatasetEntry("dapo_math", hub="BytedTsinghua-SIA/DAPO-Math-17k", problem="prompt",
                 answer="reward_model.ground_truth", dedupe=True, strip_prefix=DAPO_PREFIX, strip_suffix=DAPO_SUFFIX),
    # verl's format: each row's own system turn (LUFFY's), the gold exactly as stored, as SIREN's reward
    # reads it (recipe/entropy/reward_score.py line 8; no loader step touches it)
    DatasetEntry("openr1_math", hub="Elliott/Openr1-Math-46k-8192", format="verl"),
)}

BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "minerva", "olympiad_bench")
OFFLINE_TRAIN_SETS = ("math_train", "aime_1983_2023")  # vendored in data/vendor
HUB_TRAIN_SETS = ("deepscaler", "dapo_math", "openr1_math")  # online (or data.hub_mirror) only
LEVELS = (1, 2, 3, 4, 5, 6, 7)  # arithmetic difficulty levels (rlvr.data.arithmetic)
ARITHMETIC = "arithmetic"  # the generated task (rlvr.data.arithmetic), a training set and always evaluated


def vendored(name: str) -> str | None:
    """The vendored copy of a registered set, relative to data.vendor_dir (None: the hub only)."""
    if name in BENCHMARKS:
        return f"benchmarks/{name}.jsonl"
    return f"train/{name}.jsonl" if name in OFFLINE_TRAIN_SETS else None


def entry_of(item: str | DatasetEntry) -> DatasetEntry:
    """A registered name's entry, or the entry itself."""
    return item if isinstance(item, DatasetEntry) else REGISTERED[item]


def name_of(item: str | DatasetEntry) -> str:
    return item if isinstance(item, str) else item.name


def check_entry(where: str, e: DatasetEntry, problems: list[str]) -> None:
    """What an entry's values alone can tell (reading its file: rlvr.data.checks)."""
    if not _NAME.fullmatch(e.name) or e.name in REGISTERED or e.name == ARITHMETIC:
        taken = e.name in REGISTERED or e.name == ARITHMETIC
        problems.append(f"'{where}.name' {e.name!r} " + ("is a registered set's name: name yours apart, or write "
                        f"'{e.name}' alone to use the registered one" if taken else
                        "must be lowercase letters, digits, '_', '.' or '-' (it names the set's files)"))
    if bool(e.path) == bool(e.hub):
        problems.append(f"'{where}': give exactly one of 'path' (a local file under {OWN_DIR}/) or 'hub' "
                        "(a hub dataset id)")
    if e.path and not e.path.endswith(SUFFIXES):
        problems.append(f"'{where}.path' {e.path}: the file must end in one of {', '.join(SUFFIXES)}")
    if e.path and not _inside_own(e.path):
        problems.append(f"'{where}.path' {e.path} is outside {OWN_DIR}/, which DVC tracks as the data stage's input: "
                        f"put the file (or a link to it) in {OWN_DIR}/ and write its path from the repository root")
    for key, valid in (("format", FORMATS), ("gold", GOLDS), ("answer_form", ANSWER_FORMS)):
        value = getattr(e, key)
        if value is not None and value not in valid:
            problems.append(f"'{where}.{key}' is {value!r}; valid: {', '.join(valid)}")
    if e.limit is not None and e.limit < 1:
        problems.append(f"'{where}.limit' must be >= 1 (null: every row), got {e.limit}")
    if e.path and (e.config or e.revision or e.split != "train"):
        problems.append(f"'{where}': config, split and revision belong to a hub entry, not a local file")


def _inside_own(path: str) -> bool:
    parts = path.replace("\\", "/").split("/")
    return path.startswith(OWN_DIR + "/") and ".." not in parts


def entry_problems(where: str, items: list, problems: list[str]) -> None:
    """Every entry checked, and no two sets of one list sharing a name."""
    names = [name_of(i) for i in items]
    for i, item in enumerate(items):
        if isinstance(item, DatasetEntry):
            check_entry(f"{where}[{i}]", item, problems)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        problems.append(f"'{where}' names {', '.join(repeated)} twice: each set once")


def local_entries(data) -> list[tuple[str, DatasetEntry]]:
    """(train | eval, entry) of each params entry read from a local file."""
    return [(role, i) for role, items in (("train", data.train_sets), ("eval", data.benchmarks))
            for i in items if isinstance(i, DatasetEntry) and i.path]


@dataclass
class ArithmeticParams:
    # difficulty levels to generate (1: one-digit sums, 2: one-digit products ... 7: the hardest)
    levels: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    n_train: int = 2000  # training problems, over all levels
    n_test_per_level: int = 20  # held-out test problems per level (at most half of a small level's problems)
    # problems per level held out of training and test, the validation set of train.eval_every (at most a
    # quarter of a small level's problems); 0: none
    n_validation_per_level: int = 0
    seed: int = 1234  # the generator's seed
    ranges: ClassVar[dict[str, Range]] = {"levels": AT_LEAST_1, "n_train": AT_LEAST_1, "n_test_per_level": AT_LEAST_1,
                                          "n_validation_per_level": AT_LEAST_0, "seed": AT_LEAST_0}

    def held_out(self, trained: bool) -> bool:
        """Whether the arithmetic task gives validation problems (`trained`: it is in the training mixture)."""
        return trained and self.n_validation_per_level > 0


@dataclass
class DataParams:
    source: str = "offline"  # offline: data/vendor; online: the hub through `datasets`
    vendor_dir: str = "data/vendor"  # the vendored benchmarks and offline training sets
    out_dir: str = "data/prepared"  # train/ (the RL mixture) and eval/ (held-out sets), apart
    # the RL training mixture: arithmetic, registered sets (vendored, or hub sets online), or dataset entries
    # ({name, path or hub, columns...}: docs/data.md)
    train_sets: list[str | DatasetEntry] = field(default_factory=lambda: ["arithmetic"])
    # evaluation sets besides the held-out arithmetic: aime24, aime25, amc23, math500, minerva, olympiad_bench, or
    # dataset entries
    benchmarks: list[str | DatasetEntry] = field(default_factory=lambda: ["math500"])
    arithmetic: ArithmeticParams = field(default_factory=ArithmeticParams)
    # hub sets from local files in the hub's format: <dir>/<repo>[/<config>]/<split>.jsonl
    hub_mirror: str | None = None
    # problems held out of the training mixture (every copy of each), the validation set of train.eval_every,
    # besides the arithmetic task's own (data.arithmetic.n_validation_per_level)
    validation_size: int = 0
    # Training prompts longer than this many tokens (after the chat template, as the model sees them) are
    # dropped, as verl's dataset does with data.max_prompt_length (null: none dropped)
    max_prompt_tokens: int | None = None
    # a vendored row that cannot be read (not JSON, no problem or answer) stops the data stage, naming its
    # file and line; true: such rows are skipped, and the report says how many each set lost
    skip_bad_rows: bool = False
    ranges: ClassVar[dict[str, Range]] = {"validation_size": AT_LEAST_0, "max_prompt_tokens": AT_LEAST_1}

    @property
    def train_names(self) -> list[str]:
        return [name_of(s) for s in self.train_sets]

    @property
    def benchmark_names(self) -> list[str]:
        return [name_of(s) for s in self.benchmarks]

    @property
    def sets_file(self) -> Path:
        """{set: its source, rows, role and overlaps}: what the data stage read, for the report."""
        return self.eval_dir / "sets.json"

    @property
    def skipped_rows_file(self) -> Path:
        """{set: [line numbers]} of the rows skipped (data.skip_bad_rows, or the hub's rows without an answer)."""
        return self.eval_dir / "skipped_rows.json"

    @property
    def train_dir(self) -> Path:
        return Path(self.out_dir) / "train"

    @property
    def eval_dir(self) -> Path:
        return Path(self.out_dir) / "eval"

    @property
    def validates(self) -> bool:
        """Training has problems held out of it to validate on."""
        return self.validation_size > 0 or self.arithmetic.held_out("arithmetic" in self.train_names)

    @property
    def validation_file(self) -> Path:
        """Held out of the training mixture, beside it: what the train stage validates on."""
        return self.train_dir / "validation.jsonl"
