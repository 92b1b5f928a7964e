"""Each retrieval design over the formats knowledge base: a folder of experiment configs in which
``fmt-NAME`` extends ``NAME`` with ``formats-mixed``'s data and loader (PDF, DOCX, HTML and markdown),
beside copies of every config of ``--experiments``, so that ``extends`` resolves there.

    python scripts/formats_configs.py --out reports/_designs/fmt-experiments hybrid hybrid-headers-merged
    lab run fmt-hybrid --experiments reports/_designs/fmt-experiments --retrieval-only --reports reports/_designs/fmt

The knowledge base's and the eval set's paths are written absolute: a config's relative paths are
read from its own folder's parent.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

from lab.config import load_experiment
from lab.errors import LabError


def write_configs(names: list[str], experiments: Path, out: Path, source: str = "formats-mixed") -> list[Path]:
    """Copies of every config of ``experiments`` into ``out``, and ``fmt-NAME.yaml`` for each name: NAME
    with the data and loader sections of ``source`` (its paths made absolute). Returns the new
    files; a name that is not a config of ``experiments`` raises LabError before anything is written."""
    fmt = load_experiment(source, experiments)
    for name in names:
        load_experiment(name, experiments)  # an unknown name fails here, with the names available
    out.mkdir(parents=True, exist_ok=True)
    for path in experiments.glob("*.yaml"):
        shutil.copyfile(path, out / path.name)
    data = {"knowledge_base": str((ROOT / fmt.data.knowledge_base).resolve()),
            "eval_set": str((ROOT / fmt.data.eval_set).resolve())}  # relative paths would follow the folder
    written = []
    for name in names:
        body = {"schema_version": 1, "extends": name,
                "description": f"{name} over the formats knowledge base ({source}'s loader)",
                "data": data,
                "loader": {"extensions": list(fmt.loader.extensions)}}
        path = out / f"fmt-{name}.yaml"
        path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
        written.append(path)
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="folder of configs to write")
    ap.add_argument("--experiments", type=Path, default=ROOT / "experiments")
    ap.add_argument("names", nargs="+", help="designs to run over the formats knowledge base")
    args = ap.parse_args()
    try:
        written = write_configs(args.names, args.experiments, args.out)
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{len(written)} configs in {args.out}: " + ", ".join(p.stem for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
