"""What sealing costs a checkpoint: a state of GB GiB of float32 tensors written, sealed and fsynced
through nano's checkpoint engine as the Python API does it (torch.save straight into the engine's
temporary file, each 16 MiB chunk sealed (GMAC) from the page cache on every core as soon as it is
written, the chunks' tags written after the payload and sealed with HMAC-SHA256 under the folder's key;
fsync, rename, fsync of the folder), and chosen, verified and loaded back as a restarted rank 0
does (the seal over the header and tags checked, then each chunk on the other cores while
torch.load reads the ones before it, through the one descriptor),
beside torch.save to a file with its fsync and torch.load of the same tensors alone.
Interleaved, RUNS times each; prints the median and range of each, the ratios of the medians and
of the fastest runs, and the speed
of the seal itself (the engine's verification of a file in the page cache on every core) beside
OpenSSL's HMAC-SHA256 on one core.
Usage: checkpoint_seal.py PACKAGE_DIR WORK_DIR [RUNS] [GB]"""
import hashlib
import hmac
import os
import statistics
import sys
import time


def main():
    if len(sys.argv) < 3:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    sys.path.insert(0, sys.argv[1])
    import torch
    from nano_torch import _C
    work, runs = sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3
    gib = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    torch.manual_seed(0)
    per = 16 << 20  # 16 MiB tensors
    count = max(1, int(gib * (1 << 30)) // per)
    state = {f"w{i}": torch.randn(per // 4) for i in range(count)}
    size = count * per
    folder = _C.CheckpointFolder(os.path.join(work, "nano"), True, False)
    plain = os.path.join(work, "plain.pt")
    times = {"torch.save+fsync": [], "nano write": [], "torch.load": [], "nano read+load": []}

    def plain_write(step):
        # A new file each time, the one before it removed once it is on disk: as the engine keeps one.
        with open(f"{plain}.{step}", "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(f"{plain}.{step - 1}"):
            os.unlink(f"{plain}.{step - 1}")

    def nano_write(step):
        writer = folder.start(step, 1, torch.__version__)
        torch.save(state, writer)  # as the Python API saves: straight into the engine's file
        name = writer.finish()
        folder.prune(1, None)
        return name

    def nano_read(name):
        # As a restarted rank 0 resumes: a folder object of its own, which has not seen the file,
        # chooses it (its seal over the header and tags) and loads it as its chunks verify.
        from nano_torch._checkpoint import _Payload
        reader = _C.CheckpointFolder(os.path.join(work, "nano"), False, False)
        choice = reader.choose()
        assert choice["name"] == name, choice
        with _Payload(reader.open_verified(name, choice["seal"])) as payload:
            state, damaged = payload.load()
            assert not damaged, damaged
            return state

    name = None
    for run in range(runs):
        for what in ("torch.save+fsync", "nano write") if run % 2 == 0 else ("nano write", "torch.save+fsync"):
            os.sync()  # each write starts with no other write-back under way (the file unlinked before)
            start = time.perf_counter()
            if what == "nano write":
                name = nano_write(run + 1)
            else:
                plain_write(run + 1)
            times[what].append(time.perf_counter() - start)
        for what in ("torch.load", "nano read+load") if run % 2 == 0 else ("nano read+load", "torch.load"):
            start = time.perf_counter()
            if what == "torch.load":
                back = torch.load(f"{plain}.{run + 1}")
            else:
                back = nano_read(name)
            times[what].append(time.perf_counter() - start)
            assert torch.equal(back["w0"], state["w0"])
            del back
    # The seal's own speed: verifying the last file (in the page cache) on every core, which is
    # GMAC (AES-256-GCM) over 16 MiB chunks; and HMAC-SHA256 on one core for comparison.
    verify = []
    for _ in range(3):
        start = time.perf_counter()
        payload = _C.CheckpointFolder(os.path.join(work, "nano"), False, False).open_verified(name, "")
        payload.wait_verified()  # every chunk, on every core
        payload.close()
        verify.append(time.perf_counter() - start)
    seal_speed = size / statistics.median(verify) / 1e9
    key, data = os.urandom(32), os.urandom(min(size, 1 << 30))
    start = time.perf_counter()
    hmac.new(key, data, hashlib.sha256).digest()
    mac_speed = len(data) / (time.perf_counter() - start) / 1e9
    print(f"checkpoint sealing: {size / (1 << 30):.2f} GiB of float32 tensors, {runs} runs, medians (range) in s")
    for what, values in times.items():
        print(f"  {what:18s} {statistics.median(values):7.2f}  ({min(values):.2f}-{max(values):.2f})")
    write = statistics.median(times["nano write"]) / statistics.median(times["torch.save+fsync"])
    read = statistics.median(times["nano read+load"]) / statistics.median(times["torch.load"])
    both = (statistics.median(times["nano write"]) + statistics.median(times["nano read+load"])) / (
        statistics.median(times["torch.save+fsync"]) + statistics.median(times["torch.load"]))
    print(f"  ratios of the medians: write {write:.3f}x, read {read:.3f}x, write+read {both:.3f}x (goal: at most 1.10x)")
    # The fastest of each: what the seal costs when nothing else on the VM (the disk's write-back
    # of another file, a neighbour) gets in the way.
    fastest = {what: min(values) for what, values in times.items()}
    print(f"  ratios of the fastest: write {fastest['nano write'] / fastest['torch.save+fsync']:.3f}x, read "
          f"{fastest['nano read+load'] / fastest['torch.load']:.3f}x")
    print(f"  the seal, verified from the page cache on {len(os.sched_getaffinity(0))} cores: {seal_speed:.2f} GB/s "
          f"(GMAC chunks); HMAC-SHA256 on one core, for comparison: {mac_speed:.2f} GB/s (both OpenSSL's libcrypto)")


if __name__ == "__main__":
    main()
