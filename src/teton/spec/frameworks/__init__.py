"""A framework's job config as a teton spec: Megatron-LM argument lists, NeMo recipes (2.0 dumps and
1.0 hydra YAML), torchtitan TOML and MaxText YAML (docs/import.md).

``import_config(path_or_text)`` returns the spec mapping and an :class:`ImportReport` of what
mapped (their key -> a teton field), what was defaulted (teton fields the config did not give,
with the value used) and what has no meaning in teton (named, with why). The spec is validated
with :func:`teton.spec.load_spec` before it is returned; a rule it breaks is blamed on the
config key it came from.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from teton.errors import SpecError
from teton.spec.frameworks.common import ImportReport, Mapper
from teton.spec.frameworks.finish import finish

FRAMEWORKS = ("megatron", "nemo", "torchtitan", "maxtext")
MAX_CONFIG_BYTES = 4_000_000  # a job config is kilobytes; a larger file is not one


def import_config(path_or_text: str | Path, framework: str = "auto", *, cluster: str | None = None,
                  gpus: int | None = None, overrides: list[str] | None = None) -> tuple[dict[str, Any], ImportReport]:
    """(teton spec mapping, report) of a framework config: a file path, or the config's text.

    ``cluster``: a cluster preset or file (default: ``meta-roce-24k``, H100s); ``gpus``: the GPU
    count when the config leaves it to the launcher; ``overrides``: ``key.path=value`` applied to
    the imported spec (for what the config cannot say, like a tokenizer's vocabulary)."""
    if framework not in ("auto", *FRAMEWORKS):
        raise SpecError("framework", framework, f"one of auto, {', '.join(FRAMEWORKS)}")
    text, source, suffix = _read(path_or_text)
    if framework == "auto":
        framework = detect(text, suffix, source)
    m = _import(framework, text, suffix, source, gpus)
    spec = finish(m, source, cluster, gpus, overrides)
    return spec, m.report(source)


def _read(path_or_text: str | Path) -> tuple[str, str, str]:
    """(text, source name, lower-case suffix) of a path or a config given as text."""
    if isinstance(path_or_text, Path) or ("\n" not in path_or_text and len(path_or_text) < 4096
                                           and os.path.isfile(path_or_text)):
        path = Path(path_or_text)
        try:
            if path.stat().st_size > MAX_CONFIG_BYTES:
                raise SpecError("CONFIG", str(path), f"over {MAX_CONFIG_BYTES:,} bytes: not a job config")
            return path.read_text(), str(path), path.suffix.lower()
        except OSError as err:
            raise SpecError("CONFIG", str(path), f"cannot read the file ({err.strerror})") from None
        except UnicodeDecodeError:
            raise SpecError("CONFIG", str(path), "not a UTF-8 text file") from None
    return str(path_or_text), "(text)", ""


def _structured(text: str, suffix: str, source: str) -> Any:
    """The YAML / JSON / TOML ``text`` parsed as a spec file is (keys unique), or a one-line error."""
    from teton.spec.read import parse_text

    return parse_text(text, suffix, source)


def detect(text: str, suffix: str, source: str) -> str:
    """The framework of a config, from its suffix and its keys."""
    if suffix == ".toml":
        return "torchtitan"
    if "maxtext" in text.lower() and suffix not in (".yaml", ".yml", ".json"):
        from teton.spec.frameworks.maxtext import command_config

        if command_config(text) is not None:
            return "maxtext"
    if suffix in (".sh", ".bash", ".txt", ".args") or text.lstrip().startswith(("--", "#!", "torchrun", "python")):
        return "megatron"
    try:
        data = _structured(text, suffix, source)
    except SpecError:
        data = None
    if isinstance(data, dict):
        keys = set(data)
        if "job" in keys and ("cluster" in keys or "model" in keys):
            raise SpecError("CONFIG", source, "already a teton spec: teton run it")
        if "trainer" in keys or ("nemo" in str(data.get("_target_", "")) and isinstance(data.get("config"), dict)):
            return "nemo"
        if "model_name" in keys or "per_device_batch_size" in keys or any(str(k).startswith(("ici_", "dcn_"))
                                                                          for k in keys):
            return "maxtext"
        if keys & {"parallelism", "training"} and isinstance(data.get("model"), dict):
            return "torchtitan"
    if data is None and suffix == "":
        try:
            if isinstance(tomllib.loads(text).get("model"), dict):
                return "torchtitan"
        except tomllib.TOMLDecodeError:
            pass
    if "--" in text and not isinstance(data, dict):
        return "megatron"
    raise SpecError("framework", "auto", f"cannot tell the framework of {source}: give --framework "
                    f"{' | '.join(FRAMEWORKS)}")


def _import(framework: str, text: str, suffix: str, source: str, gpus: int | None) -> Mapper:
    if framework == "megatron":
        from teton.spec.frameworks.megatron import import_megatron

        return import_megatron(text, gpus)
    command = None
    if framework == "maxtext" and suffix not in (".yaml", ".yml", ".json"):
        from teton.spec.frameworks.maxtext import command_config

        command = command_config(text)
    if command is not None:
        data: Any = command
    elif framework == "torchtitan":
        data = _structured(text, ".toml" if suffix in ("", ".toml") else suffix, source)
    else:
        data = _structured(text, suffix, source)
    if not isinstance(data, dict):
        raise SpecError("CONFIG", source, f"a {framework} config is a mapping of keys (got {type(data).__name__})")
    if framework == "nemo":
        from teton.spec.frameworks.nemo import import_nemo

        return import_nemo(data, gpus)
    if framework == "torchtitan":
        from teton.spec.frameworks.torchtitan import import_torchtitan

        return import_torchtitan(data, gpus)
    from teton.spec.frameworks.maxtext import import_maxtext

    return import_maxtext(data, gpus)


__all__ = ["FRAMEWORKS", "ImportReport", "detect", "import_config"]
