"""One HostFilesystem used from many threads at once."""

import threading

import sandpod


def test_many_threads_one_filesystem(fs, ws):
    n_threads, n_ops = 8, 60
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)

    def worker(t: int) -> None:
        try:
            start.wait()
            for i in range(n_ops):
                p = f"t{t}/f{i % 5}.txt"
                body = f"thread {t} op {i}\n" * (1 + i % 7)
                fs.write(p, body)
                assert fs.read(p).content == body
                assert fs.read_bytes(p).content == body.encode()
                fs.write(f"t{t}/log", f"{i}\n", mode="append")
                assert fs.exists(p) and fs.stat(p).size_bytes == len(body)
                if i % 10 == 0:
                    assert len(fs.list(f"t{t}")) >= 2
                    assert fs.grep(f"thread {t} op", path=f"t{t}")
                    assert fs.glob("*.txt", path=f"t{t}")
                    fs.snapshot()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    for t in range(n_threads):
        assert (ws / f"t{t}/log").read_text() == "".join(f"{i}\n" for i in range(n_ops))
    assert isinstance(fs, sandpod.SnapshotableFilesystem)
