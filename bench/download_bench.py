"""Download throughput on loopback: Inglenook's downloader against `curl -o`, same URL.

The fake Hub (tests/fakehub.py) serves a generated file (500 MB by default) with sendfile, through
the same 302-to-CDN hop as the real Hub. Inglenook's download_file does everything it does for a
user: HEAD, stream, sha256, fsync, atomic rename. curl only writes the bytes. Both write into the
same folder: by default one on tmpfs (/dev/shm), where fsync costs nothing, so the figure compares
the transfer and not the disk; `--dest DIR` measures a real disk, fsync included.

Best of `--runs` for each (and the medians), alternating. Prints MB/s and the ratio; writes
bench/download_results.json. Takes about 10 s at 500 MB with 5 runs on a 2-CPU machine
(generating the file takes ~2 s of that). The ratio is noisy where the server, the client and
curl share two CPUs.
Not part of the tests.

    .venv/bin/python bench/download_bench.py [--size-mb 500] [--runs 3] [--dest DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakehub import FakeFile, FakeHub, hub_env  # noqa: E402

REPO = "bench/Big-GGUF"
NAME = "big.Q4_K_M.gguf"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dest", type=Path, default=None,
                        help="where the downloads are written (default: tmpfs if there is one)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "download_results.json")
    args = parser.parse_args()
    size = args.size_mb * 1_000_000
    shm = Path("/dev/shm")
    base = args.dest or (shm if shm.is_dir() and shutil.disk_usage(shm).free > 3 * size else None)

    with tempfile.TemporaryDirectory(dir=base) as work_s, \
            tempfile.TemporaryDirectory() as served_s:
        work = Path(work_s)
        t0 = time.perf_counter()
        hub = FakeHub(Path(served_s))
        hub.add_repo(REPO, [FakeFile(NAME, size)])
        print(f"generated {args.size_mb} MB in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        with hub:
            os.environ.update(hub_env(hub))
            os.environ.pop("HF_HUB_OFFLINE", None)
            os.environ["INGLENOOK_HOME"] = str(work / "home")
            from inglenook.models.download import download_file

            url = f"{hub.url}/{REPO}/resolve/main/{NAME}"
            curl = shutil.which("curl")
            ours: list[float] = []
            theirs: list[float] = []
            for _ in range(args.runs):
                dest = work / "ours"
                t = time.perf_counter()
                path = download_file(REPO, NAME, dest_dir=dest)
                ours.append(time.perf_counter() - t)
                shutil.rmtree(dest)
                assert path.name == NAME
                if curl:
                    out = work / "curl.bin"
                    t = time.perf_counter()
                    subprocess.run([curl, "-sSfL", "--noproxy", "127.0.0.1", "-o", str(out), url],
                                   check=True)
                    theirs.append(time.perf_counter() - t)
                    assert out.stat().st_size == size
                    out.unlink()

    ours_mb_s = size / min(ours) / 1e6
    result: dict[str, object] = {
        "size_mb": args.size_mb, "runs": args.runs, "dest": "tmpfs" if base == shm else str(base),
        "inglenook_mb_s": round(ours_mb_s, 1),
        "inglenook_median_mb_s": round(size / statistics.median(ours) / 1e6, 1),
        "inglenook_seconds": [round(s, 3) for s in ours],
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "machine": platform.machine(),
    }
    if theirs:
        curl_mb_s = size / min(theirs) / 1e6
        median_ratio = statistics.median(theirs) / statistics.median(ours)
        result.update(curl_mb_s=round(curl_mb_s, 1),
                      curl_median_mb_s=round(size / statistics.median(theirs) / 1e6, 1),
                      curl_seconds=[round(s, 3) for s in theirs],
                      ratio=round(ours_mb_s / curl_mb_s, 3), median_ratio=round(median_ratio, 3))
        print(f"best of {args.runs}: inglenook {ours_mb_s:.0f} MB/s, curl {curl_mb_s:.0f} MB/s, "
              f"ratio {ours_mb_s / curl_mb_s:.2f} (ratio of medians {median_ratio:.2f})")
    else:
        result["curl_mb_s"] = None
        print(f"inglenook {ours_mb_s:.0f} MB/s (no curl to compare with)")
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
