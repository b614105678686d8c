"""What every importer shares: the mapping report (frozen dataclasses), the :class:`Mapper` that
each framework module fills while it reads a config, and value readers whose errors are one line
naming the framework's key, its value and what is allowed.

A config's keys end in exactly one of three tables: **mapped** (their key -> a teton field), **no
meaning** (named with why: a training hyper-parameter, a path, a mechanism teton does not model)
or, for teton fields the config did not give, **defaulted** (the value used and where it came
from: the framework's own default, a preset, teton's default). :meth:`Mapper.leftovers` lists
every key no importer read as no meaning, so nothing is dropped in silence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from teton.errors import SpecError

# Why a key has no meaning in teton (the categories of the no-meaning table).
TRAINING = "a training hyper-parameter (optimiser, schedule, initialisation): no effect on step time or memory"
DATA = "data, tokenizer or file paths: teton prices the step, not the data"
LOGGING = "logging, profiling, checkpoint files or evaluation: not part of the simulated step"
RUNTIME = "a runtime or launcher setting teton does not price"
FP8_KNOB = "an fp8 scaling hyper-parameter: the recipe's cost is priced by software.fp8_recipe"
NOT_MODELLED = "changes the step, but teton has no field for it (not modelled)"
UNKNOWN = "not a key the importer reads"
NULL = "null (not set): the framework's default applies"


class Why:
    """The no-meaning reasons by name (``Why.TRAINING``), for the frameworks' tables."""

    TRAINING, DATA, LOGGING, RUNTIME = TRAINING, DATA, LOGGING, RUNTIME
    FP8_KNOB, NOT_MODELLED, UNKNOWN, NULL = FP8_KNOB, NOT_MODELLED, UNKNOWN, NULL


@dataclass(frozen=True)
class Mapped:
    """A config key that became a teton field."""

    key: str
    value: Any
    field: str
    teton: Any
    note: str = ""


@dataclass(frozen=True)
class Defaulted:
    """A teton field the config did not give, and the value used."""

    field: str
    value: Any
    why: str


@dataclass(frozen=True)
class NoMeaning:
    """A config key teton has no field for."""

    key: str
    value: Any
    why: str


@dataclass(frozen=True)
class ImportReport:
    """What ``import_config`` did with each key of a framework config."""

    framework: str
    source: str
    mapped: tuple[Mapped, ...]
    defaulted: tuple[Defaulted, ...]
    no_meaning: tuple[NoMeaning, ...]

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-safe data (a config's dates, NaNs and other values as text)."""
        return {"framework": self.framework, "source": self.source,
                "mapped": [_json_safe(asdict(r)) for r in self.mapped],
                "defaulted": [_json_safe(asdict(r)) for r in self.defaulted],
                "no_meaning": [_json_safe(asdict(r)) for r in self.no_meaning]}


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return str(value)
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


class Mapper:
    """Collects the spec mapping and the report rows while a framework module reads ``config``
    (a flat mapping: ``--flag`` -> value, or ``dotted.key`` -> value)."""

    def __init__(self, framework: str, config: dict[str, Any], no_meaning: dict[str, str] | None = None):
        self.framework = framework
        self.config = config
        self.spec: dict[str, Any] = {"job": {}, "software": {}}
        self.mapped: list[Mapped] = []
        self.defaulted: list[Defaulted] = []
        self.ignored: list[NoMeaning] = []
        self.used: set[str] = set()
        self.sources: dict[str, str] = {}  # teton field -> the config key it came from
        self.no_meaning_table = no_meaning or {}
        self.missing: dict[str, SpecError] = {}  # teton field -> the error, unless a --set gives it
        self.gpus_option: int | None = None  # --gpus, for configs that leave the count to the launcher

    # --- reading ----------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        return key in self.config

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (marked read), or ``default`` when the config does not give it."""
        if key in self.config:
            self.used.add(key)
            return self.config[key]
        return default

    def first(self, *keys: str) -> tuple[str | None, Any]:
        """(key, value) of the first of ``keys`` the config gives (all of them marked read)."""
        hit: tuple[str | None, Any] = (None, None)
        for key in keys:
            if key in self.config:
                self.used.add(key)
                if hit[0] is None:
                    hit = (key, self.config[key])
        return hit

    # --- writing ----------------------------------------------------------------------------
    def _set(self, field: str, value: Any) -> None:
        section, _, name = field.partition(".")
        if not name:
            self.spec[section] = value
            return
        node = self.spec.setdefault(section, {})
        if not isinstance(node, dict):  # a preset name, now with overrides
            node = self.spec[section] = {"base": node}
        node[name] = value

    def put(self, field: str, value: Any, key: str, raw: Any, note: str = "") -> None:
        """Set teton ``field`` to ``value``, read from the config's ``key`` (given as ``raw``)."""
        self._set(field, value)
        self.used.add(key)
        self.sources.setdefault(field, key)
        self.mapped.append(Mapped(key, raw, field, value, note))

    def default(self, field: str, value: Any, why: str, write: bool = True) -> None:
        """Set teton ``field`` to ``value``, a default the config did not give (``why``: whose);
        ``write=False``: only the row (teton derives the value itself)."""
        if write:
            self._set(field, value)
        self.defaulted.append(Defaulted(field, value, why))

    def ignore(self, key: str, raw: Any, why: str) -> None:
        self.used.add(key)
        self.ignored.append(NoMeaning(key, raw, why))

    def leftovers(self) -> None:
        """Every key not read yet: a no-meaning row (the framework's reason, else unknown); a key
        read without a row of its own (a null, a switch that only qualifies another key) gets one
        too, so that no key is dropped in silence."""
        covered = {part.strip() for r in (*self.mapped, *self.ignored) for part in r.key.split(" x ")}
        for key, raw in self.config.items():
            if key not in self.used:
                self.ignore(key, raw, self.reason(key))
            elif key not in covered and key.removeprefix("torchrun ").removeprefix("deepspeed ") not in covered:
                why = self.reason(key)
                self.ignore(key, raw, NULL if raw is None else why if why != UNKNOWN else
                            "read, but no teton field of its own")

    def reason(self, key: str) -> str:
        """The no-meaning reason of ``key``: the table's entry for it or for its last part, or the
        longest prefix of it the table names (``optim.sched.`` for ``optim.sched.warmup_steps``)."""
        table = self.no_meaning_table
        if key in table:
            return table[key]
        last = key.rsplit(".", 1)[-1]
        if last in table:
            return table[last]
        prefixes = [p for p in table if p.endswith((".", " ")) and key.startswith(p)]
        return table[max(prefixes, key=len)] if prefixes else UNKNOWN

    def report(self, source: str) -> ImportReport:
        return ImportReport(self.framework, source, tuple(self.mapped), tuple(self.defaulted), tuple(self.ignored))


# --- value readers -----------------------------------------------------------------------------
def _hint(value: Any) -> str:
    return " (an unset shell variable? the importer expands NAME=value lines of the same file)" \
        if isinstance(value, str) and "$" in value else ""


def as_int(key: str, value: Any, minimum: int | None = 1, allow: tuple[int, ...] = ()) -> int:
    """``value`` as an integer (a string of digits too); at least ``minimum`` unless in ``allow``."""
    number: Any = value
    if isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = value
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if not isinstance(number, int) or isinstance(number, bool):
        raise SpecError(key, value, "must be an integer" + _hint(value))
    if number in allow:
        return number
    if minimum is not None and number < minimum:
        extra = f" or {', '.join(map(str, allow))}" if allow else ""
        raise SpecError(key, value, f"must be an integer >= {minimum}{extra}")
    return number


def as_float(key: str, value: Any, minimum: float = 0.0) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or number != number or number < minimum or number == float("inf"):
        raise SpecError(key, value, f"must be a finite number >= {minimum:g}" + _hint(value))
    return number


def as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise SpecError(key, value, "must be true or false")


def choice(key: str, value: Any, table: dict[str, Any], what: str = "") -> Any:
    """``table[value]`` (compared as lower-case text); a one-line error naming the choices."""
    text = str(value).strip().lower() if value is not None else "null"
    for name, out in table.items():
        if name.lower() == text:
            return out
    shown = ", ".join(str(k) for k in table)
    raise SpecError(key, value, f"one of {shown}" + (f"; {what}" if what else ""))


def padded_vocab(vocab: int, divisible_by: int, tp: int) -> int:
    """The vocabulary Megatron-LM / NeMo allocate: padded up to a multiple of
    ``make_vocab_size_divisible_by * tp`` (megatron/training/tokenizer: _vocab_size_with_padding)."""
    multiple = divisible_by * tp
    return -(-vocab // multiple) * multiple


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``dotted.key`` -> value; lists of mappings indexed (``callbacks.0.x``),
    other lists kept as values."""
    out: dict[str, Any] = {}
    if isinstance(data, dict):
        for k, v in data.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict) and v:
                out.update(flatten(v, key + "."))
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                for i, x in enumerate(v):
                    out.update(flatten(x, f"{key}.{i}."))
            else:
                out[key] = v
    return out


# Tokenizers whose vocabulary is fixed and public (a config that names one need not give its size).
TOKENIZER_VOCAB = {
    "gpt2bpetokenizer": 50257,  # Megatron-LM --tokenizer-type GPT2BPETokenizer (GPT-2's BPE)
    "meta-llama/meta-llama-3": 128256, "meta-llama/llama-3": 128256,  # Llama 3 / 3.1 (HF config.json)
    "meta-llama/llama-2": 32000,  # Llama 2 (HF config.json)
    "mistralai/mixtral-8x7b": 32000,
}


def tokenizer_vocab(name: Any) -> int | None:
    """The vocabulary of a tokenizer :data:`TOKENIZER_VOCAB` knows by (a prefix of) its name."""
    text = str(name or "").strip().lower()
    return next((v for k, v in TOKENIZER_VOCAB.items() if text.startswith(k)), None)
