import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama3-405b-16k.yaml"


@pytest.fixture
def example_spec():
    return EXAMPLE


@pytest.fixture(scope="session")
def roce():
    """Meta's RoCE cluster preset (meta-roce-24k: 24,576 H100s)."""
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec

    return ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"])


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run the ``teton`` console entry point in-process: returns (exit code, stdout, stderr)."""
    from teton.cli import main

    def run(*args: str):
        import signal

        monkeypatch.setattr(sys, "argv", ["teton", *map(str, args)])
        code = 0
        handler = signal.getsignal(signal.SIGINT)  # main() installs its own and ignores a late Ctrl-C
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            signal.signal(signal.SIGINT, handler)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture(autouse=True)
def _sigint_handler_restored():
    """``teton.cli.main()`` ignores Ctrl-C once its verb is over (a late one must not turn the exit
    into a traceback): a test that calls it in-process gets the handler back, so that the processes
    later tests start do not inherit an ignored SIGINT."""
    import signal

    handler = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is not handler:
        signal.signal(signal.SIGINT, handler)


os.environ.setdefault("COLUMNS", "200")


def pytest_configure(config):
    """CI sets TETON_REQUIRE_TORCH=1 and TETON_REQUIRE_RAY=1: there the torch and Ray tests must
    run, not skip.

    A shell starts a background job (``.ci/run &``, nohup) with Ctrl-C ignored, and every process it
    starts inherits that: the Ctrl-C tests' subprocesses would never see their SIGINT. The tests run
    with Python's default handler, so that the subprocesses start with the default disposition."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get("TETON_REQUIRE_TORCH") == "1":
        try:
            import torch  # noqa: F401
        except ImportError:
            raise pytest.UsageError("TETON_REQUIRE_TORCH=1 but PyTorch is not installed: "
                                    "pip install -e '.[torch]'") from None
    if os.environ.get("TETON_REQUIRE_RAY") == "1":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise pytest.UsageError("TETON_REQUIRE_RAY=1 but Ray is not installed: pip install -e '.[ray]'") from None
