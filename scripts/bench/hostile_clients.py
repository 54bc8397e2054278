#!/usr/bin/env python3
"""Hostile clients against a running nmt serve, beside a real client (scripts/bench/hostile.sh).

For --seconds, keeps open at once:
  --stalled   connections that send part of a request line and headers, then a byte a second
  --trickling connections whose headers are whole and whose body comes a byte a second
  --chunked   chunked bodies that never end (a 16 KiB chunk every 100 ms)
  --gzip      gzip bombs: a body of a few hundred KiB that inflates to --gzip-mib MiB of zeros
Each reconnects when the server closes it (a gzip bomb a second after its answer). Meanwhile a real
client, in a process of its own so that the attackers' work does not delay its reading, sends one
sentence on a new connection every 200 ms and times its answer, and the server's resident memory
is read from /proc every 100 ms. Prints Markdown rows: | what | value | target |.
"""
import argparse
import asyncio
import gzip
import json
import multiprocessing
import statistics
import time


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


HEAD = "POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


async def attacker(port, stop, counts, kind, bomb):
    """One hostile connection, reopened whenever the server closes it."""
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts["connect_errors"] += 1
            await asyncio.sleep(0.5)
            continue
        counts[kind] += 1
        try:
            if kind in ("stalled", "trickling"):
                # Part of a request line, or whole headers and the start of a body; then a byte a second.
                first = (b"POST /translate HTTP/1.1\r\nHo" if kind == "stalled"
                         else (HEAD + "Content-Length: 100000\r\n\r\n").encode())
                writer.write(first)
                while time.monotonic() < stop and not reader.at_eof():
                    await asyncio.sleep(1)
                    writer.write(b"s" if kind == "stalled" else b" ")
                    await writer.drain()
            elif kind == "chunked":
                writer.write((HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode())
                chunk = b"4000\r\n" + b" " * 0x4000 + b"\r\n"
                while time.monotonic() < stop and not reader.at_eof():
                    writer.write(chunk)
                    await writer.drain()
                    await asyncio.sleep(0.1)
            else:  # gzip
                writer.write((HEAD + f"Content-Encoding: gzip\r\nContent-Length: {len(bomb)}\r\n\r\n").encode())
                writer.write(bomb)
                await writer.drain()
                await asyncio.wait_for(reader.read(), timeout=10)
                await asyncio.sleep(1)
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()


async def real_client(port, stop, sentence, latencies, failures):
    body = json.dumps({"text": [sentence]}).encode()
    request = (HEAD + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    while time.monotonic() < stop:
        start = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            answer = await asyncio.wait_for(reader.read(), timeout=30)
            writer.close()
            if answer.startswith(b"HTTP/1.1 200 "):
                latencies.append(1000 * (time.monotonic() - start))
            else:
                failures.append(answer[:120])
        except (OSError, asyncio.TimeoutError) as error:
            failures.append(str(error))
        await asyncio.sleep(0.2)


def real_client_process(port, seconds, sentence, results):
    """The real client in a process of its own: (latencies, failures) into `results`."""
    latencies, failures = [], []
    asyncio.run(real_client(port, time.monotonic() + seconds, sentence, latencies, failures))
    results.put((latencies, [repr(failure) for failure in failures]))


async def memory_watch(pid, stop, samples):
    while time.monotonic() < stop:
        samples.append(rss_mib(pid))
        await asyncio.sleep(0.1)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="the server's, for its memory")
    parser.add_argument("--sentence", default="Ein Hund rennt durch den Schnee .")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--stalled", type=int, default=500)
    parser.add_argument("--trickling", type=int, default=500)
    parser.add_argument("--chunked", type=int, default=200)
    parser.add_argument("--gzip", type=int, default=200)
    parser.add_argument("--gzip-mib", type=int, default=1024)
    args = parser.parse_args()

    bomb = gzip.compress(bytes(args.gzip_mib << 20), compresslevel=9)
    before = rss_mib(args.pid)
    # The real client alone first: its latency without the attack.
    quiet_latencies, failures = [], []
    await real_client(args.port, time.monotonic() + 3, args.sentence, quiet_latencies, failures)

    counts = {"stalled": 0, "trickling": 0, "chunked": 0, "gzip": 0, "connect_errors": 0}
    stop = time.monotonic() + args.seconds
    tasks = []
    for kind in ("stalled", "trickling", "chunked", "gzip"):
        for _ in range(getattr(args, kind)):
            tasks.append(asyncio.create_task(attacker(args.port, stop, counts, kind, bomb)))
            if len(tasks) % 100 == 0:
                await asyncio.sleep(0.05)  # connect in waves, as the listen backlog allows
    await asyncio.sleep(2)  # all of them connected before the real client is timed
    results = multiprocessing.Queue()
    real = multiprocessing.Process(target=real_client_process,
                                   args=(args.port, stop - time.monotonic(), args.sentence, results))
    real.start()
    samples = []
    await memory_watch(args.pid, stop, samples)
    await asyncio.gather(*tasks, return_exceptions=True)
    latencies, real_failures = results.get()
    real.join()
    failures += real_failures

    def ms(values, q):
        return f"{statistics.quantiles(values, n=100)[q - 1]:.1f}" if len(values) >= 2 else "-"

    print(f"| hostile connections opened | {counts['stalled']} stalled heads, {counts['trickling']} trickling bodies, "
          f"{counts['chunked']} endless chunked, {counts['gzip']} gzip bombs of {len(bomb) >> 10} KiB "
          f"({args.gzip_mib} MiB inflated); {counts['connect_errors']} refused | |")
    print(f"| real requests alone: p50 / p99 ms | {ms(quiet_latencies, 50)} / {ms(quiet_latencies, 99)} | |")
    print(f"| real requests under attack: answered, failed | {len(latencies)}, {len(failures)} | all answered |")
    print(f"| real requests under attack: p50 / p99 / max ms | {ms(latencies, 50)} / {ms(latencies, 99)} / "
          f"{max(latencies) if latencies else 0:.1f} | p99 < 100 |")
    growth = max(samples, default=before) - before
    print(f"| server RSS: before, peak, growth MiB | {before:.0f}, {max(samples, default=before):.0f}, "
          f"{growth:.0f} | growth < 256 |")
    for failure in failures[:3]:
        print(f"failed: {failure!r}")


if __name__ == "__main__":
    asyncio.run(main())
