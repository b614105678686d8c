"""Real local checkpoint I/O, DLIO-style: write and read sharded files, compare with the model.

The spec's per-rank checkpoint sizes (policy ``spread`` etc.) are scaled by ``scale``; at most
``max_files`` ranks are sampled evenly. ``writers`` threads write the shards (O_EXCL create,
``block_bytes`` writes of incompressible bytes, fsync, then POSIX_FADV_DONTNEED so the read back
comes from the device, not the page cache), then read them back. Measured bandwidth = bytes /
wall time of the phase. The model's figure for the same files, threads and one host comes from
the ``local-nvme`` tier (or the spec's storage when it is a local tier, so
``--set storage.ssd_write_gbytes_s=...`` calibrates it).

All files live in a fresh ``teton-measure-*`` directory under DIR that is removed afterwards,
also on error or Ctrl-C. An unwritable DIR or a full disk (ENOSPC) is a one-line SpecError.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from teton.errors import SpecError
from teton.progress import progress_bar
from teton.spec.storage import StorageSystem, checkpoint_policy, spec_storage, storage_system
from teton.storage.checkpoint import rank_state
from teton.storage.transfer import transfer

BLOCK_BYTES = 8 * 2**20


def _sizes(spec, scale: float, max_files: int) -> np.ndarray:
    st = rank_state(spec, checkpoint_policy(spec))
    sizes = st.written_bytes[st.written_bytes > 0]
    if sizes.size > max_files:
        sizes = sizes[np.linspace(0, sizes.size - 1, max_files).round().astype(int)]
    return np.maximum(1, np.round(sizes * scale)).astype(np.int64)


def local_system(spec) -> StorageSystem:
    """The local tier the measurement is compared with."""
    try:
        system = spec_storage(spec)
    except SpecError:
        system = None
    if system is not None and system.kind == "local":
        return system
    return storage_system({"preset": "local-nvme"})


def _fail(directory: Path, err: OSError, done_bytes: int = 0) -> SpecError:
    if err.errno == errno.ENOSPC:
        return SpecError("directory", str(directory),
                         f"disk full (ENOSPC) after {done_bytes:,} bytes; the partial files were removed")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return SpecError("directory", str(directory), f"directory not writable ({err.strerror})")
    return SpecError("directory", str(directory), f"I/O error ({err.strerror or err})")


def _write_file(path: Path, size: int, buf: bytes, counter: list[int]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        left = size
        view = memoryview(buf)
        while left > 0:
            n = os.write(fd, view[: min(left, len(buf))])
            left -= n
            counter[0] += n
        os.fsync(fd)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read_file(path: Path, block: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        got = 0
        while True:
            chunk = os.read(fd, block)
            if not chunk:
                return got
            got += len(chunk)
    finally:
        os.close(fd)


def _run_all(threads: int, tasks: list, bar) -> list:
    """Run (fn, args) tasks on a thread pool; on the first error cancel the rest and re-raise."""
    pool = ThreadPoolExecutor(max_workers=threads)
    try:
        futures = [pool.submit(fn, *args) for fn, args in tasks]
        out = []
        for f in futures:
            out.append(f.result())
            bar.advance()
        return out
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def measure(spec, directory: str | Path, scale: float = 1e-4, writers: int = 4, max_files: int = 256,
            block_bytes: int = BLOCK_BYTES, progress: bool = False) -> dict:
    """Write then read the scaled checkpoint shards under ``directory``; measured vs modelled."""
    directory = Path(directory)
    if not 0 < scale <= 1:
        raise SpecError("scale", scale, "must be in (0, 1]")
    if writers <= 0:
        raise SpecError("writers", writers, "must be > 0")
    if max_files <= 0:
        raise SpecError("max_files", max_files, "must be > 0")
    if not os.path.isdir(directory):
        raise SpecError("directory", str(directory), "not an existing directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise SpecError("directory", str(directory), "directory not writable (Permission denied)")
    sizes = _sizes(spec, scale, max_files)
    total = int(sizes.sum())
    free = shutil.disk_usage(directory).free
    if total > 0.95 * free:
        raise SpecError("directory", str(directory),
                        f"needs {total:,} bytes but only {free:,} are free; lower --scale or --files")
    try:
        run_dir = Path(tempfile.mkdtemp(prefix="teton-measure-", dir=directory))
    except OSError as err:
        raise _fail(directory, err) from None
    buf = np.random.default_rng(spec.seed).bytes(min(block_bytes, max(1, int(sizes.max()))))
    paths = [run_dir / f"__{i}_0.distcp" for i in range(sizes.size)]
    counter = [0]
    bar = _progress(progress, 2 * sizes.size)
    try:
        t0 = time.perf_counter()
        _run_all(writers, [(_write_file, (p, int(s), buf, counter)) for p, s in zip(paths, sizes, strict=True)], bar)
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = sum(_run_all(writers, [(_read_file, (p, block_bytes)) for p in paths], bar))
        read_s = time.perf_counter() - t0
        if got != total:
            raise SpecError("directory", str(directory), f"read back {got:,} of {total:,} bytes")
    except OSError as err:
        raise _fail(directory, err, counter[0]) from None
    finally:
        bar.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    system = local_system(spec)
    per_thread = np.bincount(np.arange(sizes.size) % writers, weights=sizes, minlength=min(writers, sizes.size))
    per_thread = per_thread[per_thread > 0]
    fpw = sizes.size / per_thread.size
    model_w = transfer(system, spec.cluster, per_thread, np.zeros(per_thread.size, int), "write",
                       files_per_writer=fpw, seed=spec.seed)
    model_r = transfer(system, spec.cluster, per_thread, np.zeros(per_thread.size, int), "read",
                       files_per_writer=fpw, seed=spec.seed)
    rows = []
    for name, secs, model in (("write", write_s, model_w), ("read", read_s, model_r)):
        measured = total / secs
        rows.append({"phase": name, "measured_bw_bytes_s": measured, "measured_s": secs,
                     "modelled_bw_bytes_s": model.delivered_bw_bytes_s, "modelled_s": model.time_s,
                     "modelled_bottleneck": model.bottleneck, "measured_over_modelled": measured / model.delivered_bw_bytes_s})
    # one-drive figures that would make the local tier reproduce this measurement
    # (only meaningful when the model is bandwidth-bound: tiny files time metadata, not the drive)
    calibration = {"ssds_per_server": 1, "ssd_write_gbytes_s": rows[0]["measured_bw_bytes_s"] / 1e9,
                   "ssd_read_gbytes_s": rows[1]["measured_bw_bytes_s"] / 1e9,
                   "bandwidth_bound": all(r["modelled_bottleneck"] != "metadata" for r in rows)}
    return {"directory": str(directory), "storage": system.name, "calibration": calibration, "files": int(sizes.size), "writers": writers,
            "scale": scale, "total_bytes": total, "file_bytes_min": int(sizes.min()), "file_bytes_max": int(sizes.max()),
            "rows": rows, "files_removed": not run_dir.exists()}


class _NoBar:
    def advance(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Bar:
    def __init__(self, total: int):

        self._p = progress_bar()
        self._p.start()
        self._t = self._p.add_task("checkpoint I/O", total=total)

    def advance(self) -> None:
        self._p.advance(self._t)

    def close(self) -> None:
        self._p.stop()


def _progress(show: bool, total: int):
    return _Bar(total) if show else _NoBar()
