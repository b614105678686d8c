"""The repository stands alone: nothing a user's clone holds points at files it does not have."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"\.\./shared|DESIGN\.md|facts §|/work/")


def test_no_reference_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    here = Path(__file__).relative_to(ROOT).as_posix()
    hits = []
    for name in tracked.split():
        path = ROOT / name
        if name == here or path.suffix not in {".py", ".md", ".toml", ".yaml", ".yml", ".json", ".cfg", ".txt"}:
            continue
        if not path.is_file():
            continue
        for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{name}:{i}: {line.strip()[:100]}")
    assert not hits, "references outside the repository:\n" + "\n".join(hits)
