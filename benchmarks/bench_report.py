"""``teton report`` benchmark: wall time of the default HTML report (all sections but search and validation) of
the Llama 3 405B example, as the CLI runs it in a fresh process (imports included), then with
``--png-dir`` (target: the default report under ~15 s).

    .venv/bin/python benchmarks/bench_report.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama3-405b-16k.yaml"


def run(*args: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "teton", "report", str(EXAMPLE), *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "report.html"
        html_s = run("--out", str(out))
        size_mb = out.stat().st_size / 1e6
        png_s = run("--out", str(out), "--png-dir", str(Path(d) / "png"))
        pngs = len(list((Path(d) / "png").glob("*.png")))
        search_s = run("--out", str(out), "--sections", "all")
    print(f"default report (405B example): {html_s:.1f} s, {size_mb:.1f} MB")
    print(f"  + --png-dir ({pngs} charts):       {png_s:.1f} s")
    print(f"  --sections all (with search): {search_s:.1f} s")
    assert html_s < 15.0, html_s


if __name__ == "__main__":
    main()
