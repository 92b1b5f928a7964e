"""Loading experiment configs: YAML files validated by the schema, with ``extends:`` inheritance.

A config names every choice of a run. ``turn18.yaml`` says ``extends: turn13`` and lists only
what changed; the fully resolved config is written into every run folder.

Merging rule for ``extends``: mappings merge key by key, the child winning; a component
section (``chunker``, ``retriever``, ``reranker``) whose ``name`` changes is replaced whole,
so a semantic chunker does not inherit ``chunk_size`` from a recursive one. ``reranker: null``
in a child removes the parent's reranker.

Overrides (``--kb``, ``--set retriever.alpha=0.5``, ``--retrieval-only``, an optimize trial) are
nested mappings merged last, built with :func:`set_path` and :func:`retrieval_only`.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from lab.config.answering import ContextConfig
from lab.config.schema import ExperimentConfig
from lab.config.target import PIPELINE_SECTIONS
from lab.config.components import ChunkerConfig, LoaderConfig, RerankerConfig, RetrieverConfig
from lab.errors import ConfigError
from lab.registry import Registry, did_you_mean

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# ---------------------------------------------------------------------------------------------
# Loading

COMPONENT_SECTIONS = ("chunker", "retriever", "reranker", "context")


def experiment_path(name: str, experiments_dir: Path) -> Path:
    """Map an experiment NAME to its file, refusing names that leave ``experiments_dir``."""
    if not name or not _NAME_RE.match(name) or ".." in name:
        raise ConfigError(
            f"invalid experiment name {name!r}",
            hint="use the file name of a config in experiments/ without .yaml, e.g. turn13",
        )
    path = experiments_dir / f"{name}.yaml"
    if not path.is_file():
        available = sorted(p.stem for p in experiments_dir.glob("*.yaml"))
        raise ConfigError(
            f"no experiment {name!r}: {path} does not exist",
            hint=f"{did_you_mean(name, available)}available: {', '.join(available) or '(none)'}",
        )
    return path


#: Limits on a config file's YAML, checked on the event stream before anything is built: deeper
#: nesting is not a config (and would exhaust the parser's recursion), and more aliases than this
#: can expand to billions of nodes ("billion laughs").
MAX_DEPTH = 32
MAX_ALIASES = 64


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key written twice in one mapping (it would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in first:
                raise ConfigError(f"{self.name} line {line}: key {key!r} is written twice (first on line {first[key]})",
                                  hint="keep one of them: YAML would silently use the last")
            first[key] = line
        return super().construct_mapping(node, deep=deep)


def _check_shape(text: str, path: Path) -> None:
    depth = aliases = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(f"{path} line {event.start_mark.line + 1}: nested more than {MAX_DEPTH} levels deep",
                                  hint="a config is a few levels of keys: flatten this part")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise ConfigError(f"{path} line {event.start_mark.line + 1}: more than {MAX_ALIASES} YAML aliases (*name)",
                                  hint="write the values out, or use extends: to share a parent's settings")


def read_yaml(path: Path) -> dict[str, Any]:
    """A config file's mapping: UTF-8, valid YAML, bounded in depth and aliases, no key twice."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                          hint=f"re-save it as UTF-8, e.g. iconv -f latin1 -t utf-8 '{path}' > fixed.yaml") from None
    try:
        _check_shape(text, path)
        loader = _UniqueKeyLoader(text)
        loader.name = str(path)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path} line {mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: invalid YAML: {problem}", hint="fix the YAML syntax") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}",
                          hint="write keys at the left margin: description:, extends:, chunker:, retriever: ...")
    return data


def describe(path: Path) -> tuple[str, str | None]:
    """(description, extends) of a config file, for `lab list`. A config that `lab run` would
    refuse raises ConfigError saying why: a folder, a broken link, an unreadable or empty file,
    invalid YAML, an extends cycle, a broken parent, an invalid key."""
    if path.is_dir():
        raise ConfigError(f"{path}: a folder, not a config file")
    if not path.exists():
        raise ConfigError(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist")
    try:
        if not path.read_text(encoding="utf-8", errors="replace").strip():
            raise ConfigError(f"{path}: an empty file (a config has at least schema_version: 1)")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    load_experiment(path.stem, path.parent)
    raw = read_yaml(path)
    description, parent = raw.get("description", ""), raw.get("extends")
    if not isinstance(description, str):
        raise ConfigError(f"{path}: 'description' must be text, not {type(description).__name__}",
                          hint="write description: followed by one line of text")
    if parent is not None and not isinstance(parent, str):
        raise ConfigError(f"{path}: 'extends' must be an experiment name", hint="e.g. extends: turn13")
    return description, parent


#: The sections that answer and grade; ``--retrieval-only`` and sweeps without answers null them.
ANSWER_SECTIONS = ("generation", "judge", "ragas")


def retrieval_only(overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with answering and grading switched off (recorded in the run's config)."""
    return {**overrides, **{section: None for section in ANSWER_SECTIONS}}


def run_overrides(kb: str | Path | None = None, eval_set: str | Path | None = None, limit: int | None = None,
                  seed: int | None = None, answers: bool = True) -> dict[str, Any]:
    """The overrides of a run on other data, as every verb and the Python API build them: the
    knowledge-base folder and eval set (``~`` expanded, made absolute, so that the config never
    falls back to its own data), a sample of ``limit`` questions with ``seed``, and, with
    ``answers=False``, :func:`retrieval_only`."""
    data: dict[str, Any] = {}
    if kb is not None:
        data["knowledge_base"] = str(Path(kb).expanduser().resolve())
    if eval_set is not None:
        data["eval_set"] = str(Path(eval_set).expanduser().resolve())
    sample = {key: value for key, value in (("limit", limit), ("seed", seed)) if value is not None}
    out: dict[str, Any] = {section: value for section, value in (("data", data), ("sample", sample)) if value}
    return out if answers else retrieval_only(out)


def set_path(overrides: dict[str, Any], path: str | tuple[str, ...], value: Any) -> dict[str, Any]:
    """``overrides`` with the dotted ``path`` (``"retriever.alpha"``) set to ``value``."""
    parts = tuple(path.split(".")) if isinstance(path, str) else path
    nested: Any = value
    for part in reversed(parts):
        nested = {part: nested}
    return merge(overrides, nested)


def merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Merge ``child`` over ``parent`` (see the module docstring for the rule)."""
    out = copy.deepcopy(parent)
    for key, value in child.items():
        base = out.get(key)
        if isinstance(base, dict) and isinstance(value, dict):
            if key in COMPONENT_SECTIONS and value.get("name", base.get("name")) != base.get("name"):
                out[key] = copy.deepcopy(value)
            else:
                out[key] = merge(base, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _resolve_raw(path: Path, experiments_dir: Path, chain: list[Path]) -> tuple[dict, list[Path]]:
    if path in chain:
        cycle = " -> ".join(p.stem for p in chain + [path])
        raise ConfigError(f"{chain[0]}: extends cycle: {cycle}", hint="remove one of the extends: lines")
    raw = read_yaml(path)
    chain = chain + [path]
    parent_name = raw.get("extends")
    if parent_name is None:
        return raw, chain
    if not isinstance(parent_name, str):
        raise ConfigError(f"{path} line {_line_of(path, ('extends',))}: 'extends' must be an experiment name")
    parent_path = experiments_dir / f"{parent_name}.yaml"
    if not _NAME_RE.match(parent_name) or not parent_path.is_file():
        raise ConfigError(
            f"{path} line {_line_of(path, ('extends',))}: extends {parent_name!r}, "
            f"but {parent_path} does not exist",
            hint=f"available: {', '.join(sorted(p.stem for p in experiments_dir.glob('*.yaml')))}",
        )
    parent, chain = _resolve_raw(parent_path, experiments_dir, chain)
    return merge(parent, raw), chain


def _line_of(path: Path, loc: tuple) -> int | None:
    """1-based line of the key at ``loc`` in the YAML file, or None."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except Exception:
        return None
    line = None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == str(key):
                    line, node = k.start_mark.line + 1, v
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _given(overrides: dict[str, Any] | None, loc: tuple) -> bool:
    """Whether ``loc`` is a value the overrides set (the command line, not a file)."""
    node: Any = overrides or {}
    for key in loc:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return bool(loc)


def _format_validation_error(exc: ValidationError, chain: list[Path], overrides: dict[str, Any] | None = None) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in _TAGS))
        dotted = ".".join(str(p) for p in loc) or "(top level)"
        where = str(chain[0])
        if _given(overrides, loc):  # not in any file: a value given on the command line
            lines.append(f"the command line (--set, --kb, --eval, --limit or --seed): field '{dotted}': "
                         + ("unknown key (check its spelling against the docs)" if err["type"] == "extra_forbidden"
                            else err["msg"]))
            continue
        for path in chain:  # the child first: report where the value was written
            line = _line_of(path, loc)
            if line is not None:
                where = f"{path} line {line}"
                break
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (remove it, or check its spelling against the docs)"
        elif err["type"] == "union_tag_invalid":
            msg = f"{msg} (valid names: {err['ctx'].get('expected_tags')})"
        lines.append(f"{where}: field '{dotted}': {msg}")
    return "\n".join(lines)


def component_names(union: Any) -> list[str]:
    """The ``name`` tags of a discriminated union of component configs."""
    inner = typing.get_args(union)[0]
    members = typing.get_args(inner) or (inner,)  # Union[X] collapses to X
    return [typing.get_args(m.model_fields["name"].annotation)[0] for m in members]


SECTION_UNIONS = {
    ("chunker",): ChunkerConfig,
    ("retriever",): RetrieverConfig,
    ("reranker",): RerankerConfig,
    ("generation", "context"): ContextConfig,
}
_TAGS = {tag for union in SECTION_UNIONS.values() for tag in component_names(union)}


def _check_component_names(raw: dict, chain: list[Path]) -> None:
    """Unknown component names fail with 'did you mean' and the valid names."""
    for loc, union in SECTION_UNIONS.items():
        value: Any = raw
        for part in loc:
            value = value.get(part) if isinstance(value, dict) else None
        if not (isinstance(value, dict) and "name" in value):
            continue
        section = ".".join(loc)
        reg: Registry[None] = Registry(section)
        for tag in component_names(union):
            reg.register(tag)(None)
        where = str(chain[0])
        for path in chain:
            line = _line_of(path, (*loc, "name"))
            if line is not None:
                where = f"{path} line {line}"
                break
        reg.check(str(value["name"]), where=f"{where}: field '{section}.name'")


def load_experiment(
    name: str,
    experiments_dir: Path,
    overrides: dict[str, Any] | None = None,
) -> ExperimentConfig:
    """Load, merge and validate ``experiments/<name>.yaml``.

    ``overrides`` is a nested mapping merged last (e.g. ``{"data": {"knowledge_base": ...}}``).
    """
    path = experiment_path(name, experiments_dir)
    raw, chain = _resolve_raw(path, experiments_dir, [])
    raw = dict(raw)
    raw["name"] = name
    raw["extends"] = read_yaml(path).get("extends")  # the direct parent, for the record
    if overrides:
        raw = merge(raw, overrides)
        raw = _formats_found(raw, overrides)
    _check_component_names(raw, chain)
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid experiment config {name!r}:\n" + _format_validation_error(exc, chain, overrides),
            hint="docs/reference/config.md lists every key, its type and its default",
        ) from None


#: The formats the lab reads (``lab.rag.loaders``), as ``lab generate`` and ``lab serve --review`` read a folder.
READABLE = (".md", ".txt", ".pdf", ".docx", ".html", ".htm", ".ipynb")


def _formats_found(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A knowledge base given for this run (``--kb``) that holds no file of the config's
    ``loader.extensions`` but files of other formats the lab reads (HTML pages, say, where the
    config reads Markdown) is read in those formats, as ``lab generate`` read it: logged, and
    recorded in the run's config. Any file of the config's formats leaves the config as it is."""
    kb = (overrides.get("data") or {}).get("knowledge_base")
    loader = raw.get("loader", {})
    extensions = loader.get("extensions", LoaderConfig().extensions) if isinstance(loader, dict) else None
    root = Path(kb) if kb else None
    if root is None or not isinstance(extensions, list) or not root.is_dir():
        return raw
    wanted = {str(e).lower() for e in extensions}
    found: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found |= {Path(f).suffix.lower() for f in files if not f.startswith(".")}
        if found & wanted:
            return raw
    readable = sorted(found & set(READABLE))
    if not readable:
        return raw
    log.warning("knowledge base %s has no %s file: reading its %s files instead (recorded as loader.extensions "
                "in the run's config)", root, ", ".join(sorted(wanted)), ", ".join(readable))
    return merge(raw, {"loader": {"extensions": readable}})


def dump_yaml(config: ExperimentConfig) -> str:
    """The resolved config as YAML; the headers, index, query, merge, gate and tracking sections only where set
    (they are newer than most runs' config.yaml; an unset one is exactly the behaviour before it existed); a
    target's config without the pipeline sections it replaces."""
    unset = {k for k in ("headers", "index", "query", "merge", "gate", "tracking") if getattr(config, k) is None}
    if config.target is not None:  # a target's config: the pipeline it replaces is not written out
        unset |= {k for k in PIPELINE_SECTIONS if getattr(config, k) is None} | {"embedding"}
    return yaml.safe_dump(config.model_dump(mode="json", exclude=unset), sort_keys=False)
